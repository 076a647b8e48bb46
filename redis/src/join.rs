//! [`join_all`]: awaits many futures at once, on the task that awaits it (no spawn, so the
//! futures may borrow). The parts of a batch that reach different places (Cluster nodes,
//! keys' publishes) are awaited this way, so that the slowest part never delays the others
//! from being sent or answered.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls every future until all are done; their outputs in order.
pub(crate) async fn join_all<F: Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let mut done = true;
        for (slot, f) in out.iter_mut().zip(futures.iter_mut()) {
            if slot.is_none() {
                match Pin::new(f).poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => done = false,
                }
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    out.into_iter()
        .map(|v| v.expect("every future ended"))
        .collect()
}
