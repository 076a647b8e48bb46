//! The bodies a [`CacheService`](super::CacheService) answers with, and reading a handler's
//! body into the cache, up to a bound.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;

use super::store::BoxError;

/// The body of a response: a kept one's, the handler's own, the handler's after the part
/// read while it was still meant for the cache, or the handler's body's failure.
#[derive(Debug)]
pub enum CacheBody<B> {
    /// A kept response's whole body.
    Full(Option<Bytes>),
    /// The handler's body, untouched.
    Inner(B),
    /// The handler's body, after its first bytes (read while the cache measured it).
    Prefixed(Option<Bytes>, B),
    /// The handler's body failed while the cache read it.
    Failed(Option<BoxError>),
}

impl<B> Body for CacheBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            CacheBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            CacheBody::Inner(b) => Pin::new(b).poll_frame(cx).map_err(Into::into),
            CacheBody::Prefixed(head, rest) => match head.take() {
                Some(h) => Poll::Ready(Some(Ok(Frame::data(h)))),
                None => Pin::new(rest).poll_frame(cx).map_err(Into::into),
            },
            CacheBody::Failed(e) => Poll::Ready(e.take().map(Err)),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            CacheBody::Full(b) => {
                http_body::SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64))
            }
            CacheBody::Inner(b) => b.size_hint(),
            CacheBody::Prefixed(h, rest) => {
                let mut hint = rest.size_hint();
                let head = h.as_ref().map_or(0, |h| h.len() as u64);
                hint.set_lower(hint.lower() + head);
                if let Some(upper) = hint.upper() {
                    hint.set_upper(upper + head);
                }
                hint
            }
            CacheBody::Failed(_) => http_body::SizeHint::default(),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            CacheBody::Full(b) => b.is_none(),
            CacheBody::Inner(b) => b.is_end_stream(),
            CacheBody::Prefixed(h, rest) => h.is_none() && rest.is_end_stream(),
            CacheBody::Failed(e) => e.is_none(),
        }
    }
}

/// A handler's body as read into the cache.
pub enum Collected<B> {
    /// All of it, within the bound.
    Whole(Bytes),
    /// Longer than the bound: what was read, and the rest.
    TooLong(Bytes, B),
}

/// Reads `body` whole if it is at most `max` bytes (trailers are not kept).
pub async fn collect<B>(mut body: B, max: usize) -> Result<Collected<B>, BoxError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Into::into)?.into_data() else {
            continue;
        };
        read.extend_from_slice(&data);
        if read.len() > max {
            return Ok(Collected::TooLong(read.freeze(), body));
        }
    }
    Ok(Collected::Whole(read.freeze()))
}
