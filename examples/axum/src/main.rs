//! `cargo run -p herdless-example-axum [redis://host:port]`: the service on 127.0.0.1:3000,
//! its cache in memory, or shared through Redis.

use herdless_example_axum::{Catalog, app, fleet_cache, memory_cache};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on http://{addr}/products/7");
    match std::env::args().nth(1) {
        Some(url) => axum::serve(listener, app(fleet_cache(&url)?, Catalog::default())).await?,
        None => axum::serve(listener, app(memory_cache(), Catalog::default())).await?,
    }
    Ok(())
}
