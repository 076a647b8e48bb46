//! An axum service with herdless's tower layer in front of it: `GET /products/{id}` is
//! cached (a slow "database" behind it counts its calls), `GET /account` answers with the
//! caller's own cookie (never cached), `GET /live` says `Cache-Control: private`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use herdless_example_axum::{Catalog, app, fleet_cache};
//! let cache = fleet_cache("redis://127.0.0.1:6379")?; // or memory_cache()
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app(cache, Catalog::default())).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use herdless::Cache;
use herdless_redis::http::{CacheLayer, Cached, ResponseCodec, ResponseStore};
use herdless_redis::{RedisBackend, TieredCache};

/// The slow origin behind the routes: how often it was asked.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// Calls of the product handler.
    pub product_calls: Arc<AtomicUsize>,
    /// Calls of the account handler.
    pub account_calls: Arc<AtomicUsize>,
}

/// The service: its routes behind `cache`.
pub fn app<S: ResponseStore>(cache: S, catalog: Catalog) -> Router {
    Router::new()
        .route("/products/{id}", get(product))
        .route("/account", get(account))
        .route("/live", get(live))
        .route("/orders", post(order))
        .with_state(catalog)
        .layer(CacheLayer::new(cache))
}

/// A cache of this process only.
pub fn memory_cache() -> Cache<Cached> {
    Cache::builder()
        .ttl(Duration::from_secs(60))
        .build()
        .expect("valid options")
}

/// A cache shared by every process of the fleet through the Redis at `url`: one handler
/// call per key for all of them.
pub fn fleet_cache(
    url: &str,
) -> Result<TieredCache<Cached, ResponseCodec>, Box<dyn std::error::Error>> {
    let backend = RedisBackend::builder(url).build()?;
    Ok(TieredCache::builder(backend, ResponseCodec)
        .ttl(Duration::from_secs(60))
        .build()?)
}

async fn product(State(c): State<Catalog>, Path(id): Path<u32>) -> impl IntoResponse {
    c.product_calls.fetch_add(1, Ordering::SeqCst);
    // The database takes its time: a herd of requests arrives meanwhile.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!("{{\"id\":{id},\"name\":\"product {id}\"}}"),
    )
}

async fn account(State(c): State<Catalog>) -> impl IntoResponse {
    let n = c.account_calls.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A new session for a visitor: its cookie is this caller's alone.
    (
        [(header::SET_COOKIE, format!("session=s{n}; HttpOnly"))],
        format!("welcome, visitor {n}"),
    )
}

async fn live(State(c): State<Catalog>) -> impl IntoResponse {
    let n = c.account_calls.fetch_add(1, Ordering::SeqCst);
    ([(header::CACHE_CONTROL, "private")], format!("live {n}"))
}

async fn order(State(c): State<Catalog>) -> impl IntoResponse {
    let n = c.product_calls.fetch_add(1, Ordering::SeqCst);
    format!("order {n}")
}
