//! [`CacheLayer`]: a tower layer that answers GET (and HEAD) requests from herdless, with one
//! handler call per key at a time: in the process over a [`herdless::Cache`], in the whole
//! fleet over a [`TieredCache`](crate::TieredCache).

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use herdless::Loaded;
use http::{Method, Request, Response, header};
use http_body::Body;
use tower::{Layer, Service};

use super::body::{CacheBody, Collected, collect};
use super::key::request_key;
use super::response::{CachedResponse, Policy};
use super::store::{BoxFuture, Cached, PageLoader, ResponseStore};

/// Caches the responses of the services it wraps (see [`CacheService`]).
#[derive(Clone, Debug)]
pub struct CacheLayer<S> {
    store: S,
    policy: Arc<Policy>,
}

impl<S: ResponseStore> CacheLayer<S> {
    /// A layer keeping responses in `store` under the default [`Policy`].
    pub fn new(store: S) -> Self {
        Self::with_policy(store, Policy::default())
    }

    /// A layer keeping responses in `store` under `policy`.
    pub fn with_policy(store: S, policy: Policy) -> Self {
        Self {
            store,
            policy: Arc::new(policy),
        }
    }
}

impl<S: Clone, I> Layer<I> for CacheLayer<S> {
    type Service = CacheService<S, I>;
    fn layer(&self, inner: I) -> Self::Service {
        CacheService {
            store: self.store.clone(),
            policy: self.policy.clone(),
            inner,
        }
    }
}

/// A service whose GET responses come from the cache: a request is keyed by its method,
/// path, canonical query and the [`Policy::vary`] headers ([`request_key`]); on a miss one
/// caller calls the handler and every concurrent caller of the key gets its response
/// (stale-while-revalidate, XFetch and the rest as the cache is configured). What a request
/// or a response says is private never reaches another caller:
///
/// - requests with `Authorization` (and, unless [`Policy::with_cookies`], `Cookie`), other
///   methods, and requests whose key is too long pass through to the handler;
/// - a response with `Set-Cookie`, `Cache-Control: private / no-store / no-cache`, a
///   status the policy does not keep, a `Vary` on what the key does not hold, or a body
///   over [`Policy::max_body`] answers its own caller only; the callers that waited for it
///   call the handler themselves;
/// - a kept response's `max-age` / `s-maxage` is its entry's ttl;
/// - when the cache cannot answer (a wait that timed out, a tier error), the handler is
///   called: the cache never fails a request the handler would have answered.
#[derive(Clone, Debug)]
pub struct CacheService<S, I> {
    store: S,
    policy: Arc<Policy>,
    inner: I,
}

/// The request and the handler, held for whoever calls the handler: the loader if this
/// caller leads, else the caller itself.
type Stash<I, B> = Arc<Mutex<Option<(I, Request<B>)>>>;

/// What the leader's handler answered that the cache does not keep: for the leader alone.
type Own<R, E> = Arc<Mutex<Option<Result<R, E>>>>;

impl<S, I, ReqB, ResB> Service<Request<ReqB>> for CacheService<S, I>
where
    S: ResponseStore,
    I: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    I::Future: Send,
    I::Error: Send + 'static,
    ReqB: Send + 'static,
    ResB: Body<Data = Bytes> + Send + Unpin + 'static,
    ResB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<CacheBody<ResB>>;
    type Error = I::Error;
    type Future = BoxFuture<Result<Self::Response, I::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        // The service polled ready is the one that answers; a clone waits for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (store, policy) = (self.store.clone(), self.policy.clone());
        Box::pin(async move {
            let Some(key) = key_of(&policy, &req) else {
                return pass(inner, req).await;
            };
            if req.method() == Method::HEAD {
                // A HEAD is answered by GET's entry; it never loads one (its body is empty).
                return match store.peek(&key).await {
                    Some(Cached::Response(r)) => Ok(full(&r, true)),
                    _ => pass(inner, req).await,
                };
            }
            let stash: Stash<I, ReqB> = Arc::new(Mutex::new(Some((inner, req))));
            let own: Own<Self::Response, I::Error> = Arc::new(Mutex::new(None));
            let loader = page_loader(stash.clone(), own.clone(), policy);
            let answer = store.get_or_load(key, loader).await;
            // This caller's own load answers it, whatever the engine answers.
            if let Some(r) = own.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return r;
            }
            let stashed = stash.lock().unwrap_or_else(|e| e.into_inner()).take();
            match (answer, stashed) {
                (Ok(Some(Cached::Response(r))), _) => Ok(full(&r, false)),
                // Another caller's private answer, or the cache could not answer: this
                // caller asks the handler itself.
                (_, Some((inner, req))) => pass(inner, req).await,
                (_, None) => unreachable!("a load that took the request answers in `own`"),
            }
        })
    }
}

/// The loader of a leader: calls the handler, keeps what may be kept, and hands the rest
/// to the leader through `own`.
fn page_loader<I, ReqB, ResB>(
    stash: Stash<I, ReqB>,
    own: Own<Response<CacheBody<ResB>>, I::Error>,
    policy: Arc<Policy>,
) -> PageLoader
where
    I: Service<Request<ReqB>, Response = Response<ResB>> + Send + 'static,
    I::Future: Send,
    I::Error: Send + 'static,
    ReqB: Send + 'static,
    ResB: Body<Data = Bytes> + Send + Unpin + 'static,
    ResB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Box::new(move || {
        Box::pin(async move {
            let taken = stash.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (mut inner, req) = taken.expect("a load runs once, with its caller's request");
            let mine = |r| {
                *own.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                Ok(Loaded::value(Cached::Private).no_cache())
            };
            let resp = match std::future::poll_fn(|cx| inner.poll_ready(cx)).await {
                Ok(()) => inner.call(req).await,
                Err(e) => Err(e),
            };
            let (parts, body) = match resp {
                Ok(r) => r.into_parts(),
                // The handler's error answers its caller; the callers that waited call the
                // handler themselves.
                Err(e) => return mine(Err(e)),
            };
            let Some(ttl) = policy.keeps(&parts) else {
                return mine(Ok(Response::from_parts(parts, CacheBody::Inner(body))));
            };
            let length = parts.headers.get(header::CONTENT_LENGTH);
            let declared = length.and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
            if declared.is_some_and(|n| n > policy.max_body) {
                return mine(Ok(Response::from_parts(parts, CacheBody::Inner(body))));
            }
            match collect(body, policy.max_body).await {
                Ok(Collected::Whole(bytes)) => {
                    let page = CachedResponse::new(&parts, bytes);
                    // The leader answers with its own copy whatever the engine does with
                    // the entry (a ttl the tier refuses, a tag invalidated meanwhile).
                    *own.lock().unwrap_or_else(|e| e.into_inner()) = Some(Ok(full(&page, false)));
                    let kept = Loaded::value(Cached::Response(page));
                    Ok(match ttl {
                        Some(t) => kept.ttl(t.min(crate::MAX_TTL)),
                        None => kept,
                    })
                }
                Ok(Collected::TooLong(head, rest)) => mine(Ok(Response::from_parts(
                    parts,
                    CacheBody::Prefixed(Some(head), rest),
                ))),
                // The body failed: the leader's connection sees it fail, as without a cache.
                Err(e) => mine(Ok(Response::from_parts(parts, CacheBody::Failed(Some(e))))),
            }
        })
    })
}

/// The cache key of `req`, if it may be answered from the cache at all.
fn key_of<B>(policy: &Policy, req: &Request<B>) -> Option<String> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return None;
    }
    let headers = req.headers();
    if headers.contains_key(header::AUTHORIZATION)
        || (!policy.with_cookies && headers.contains_key(header::COOKIE))
    {
        return None;
    }
    let mut vary = Vec::with_capacity(policy.vary.len());
    for name in &policy.vary {
        let joined: Vec<&str> = headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str())
            .collect::<Result<_, _>>()
            .ok()?;
        vary.push((name.as_str(), joined.join(",")));
    }
    let vary: Vec<(&str, &str)> = vary.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let uri = req.uri();
    let ns = policy.namespace.as_deref();
    request_key(
        ns,
        req.method().as_str(),
        uri.path(),
        uri.query().unwrap_or(""),
        &vary,
    )
    .ok()
}

/// The handler's own answer.
async fn pass<I, ReqB, ResB>(
    mut inner: I,
    req: Request<ReqB>,
) -> Result<Response<CacheBody<ResB>>, I::Error>
where
    I: Service<Request<ReqB>, Response = Response<ResB>>,
{
    std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
    let r = inner.call(req).await?;
    Ok(r.map(CacheBody::Inner))
}

/// A kept response, sent (`head`: without its body).
fn full<B>(r: &CachedResponse, head: bool) -> Response<CacheBody<B>> {
    r.to_response(head).map(|b| CacheBody::Full(Some(b)))
}
