//! Waking the JS thread when a waiter's future can make progress.
//!
//! Waiters ([`herdless::Waiter`]) and leaders queued on the origin budget are futures, polled
//! only on the JS thread. Their wakers may fire on any thread: the engine's timer thread
//! (`wait_timeout`, soft and hard deadlines) or the JS thread itself (a load completing).
//! A wake pushes the call's id onto a ready list and, if no drain is scheduled yet, asks the
//! JS thread for one through a Node-API thread-safe function. One drain then polls every
//! ready call: 5,000 waiters woken by one load cost one hop to the event loop, and the event
//! loop never blocks.
//!
//! The thread-safe function keeps the process alive only while some call waits on a wake
//! ([`Wake::keep_alive`]), so a finished program exits normally.
//!
//! The engine's events (`cache.on(...)`, see [`crate::events`]) take a second thread-safe
//! function of the same lifetime: bounded, never keeping the process alive, each event one
//! call; one that finds its queue full is dropped and counted ([`Wake::events_dropped`]).

use std::ffi::c_void;
use std::ptr;
use std::rc::Weak;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake as WakeTrait, Waker};

use napi::{Result, sys};

use herdless::Event;

use crate::js::Js;

/// What the channels call on the JS thread: the driver's state of one cache (kept weakly,
/// so that a dropped cache is not kept alive by its channels).
pub(crate) trait OnJsThread {
    /// Some wakers fired: poll their calls ([`Wake::take_ready`]).
    fn woken(self: std::rc::Rc<Self>, js: Js);
    /// An engine event reached the JS thread.
    fn event(self: std::rc::Rc<Self>, js: Js, event: Event);
}

/// The context of a channel: the state it calls.
type Context = Weak<dyn OnJsThread>;

/// The raw thread-safe function. Node-API documents `napi_call_threadsafe_function` as
/// callable from any thread; it is only released under the [`Wake::tsfn`] lock.
struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: see the type's doc: the handle is thread-safe by contract, and is never used
// after release (the lock and the `Option` guarantee it).
unsafe impl Send for Tsfn {}

/// The env cleanup hook that closes the channel when the JS environment exits (the process
/// or a worker ends): Node tears its thread-safe functions down then, and a channel released
/// after that (by a cache finalized late in the teardown) would touch freed memory.
struct ExitHook {
    env: sys::napi_env,
    arg: *const Wake,
}

// SAFETY: only used on the JS thread (connect, close): the fields are plain handles.
unsafe impl Send for ExitHook {}

/// The ready list of one cache and its wake-up channel to the JS thread.
pub(crate) struct Wake {
    ready: Mutex<Vec<u64>>,
    scheduled: AtomicBool,
    tsfn: Mutex<Option<Tsfn>>,
    /// The events' channel (see the module's doc).
    events: Mutex<Option<Tsfn>>,
    events_dropped: AtomicU64,
    exit_hook: Mutex<Option<ExitHook>>,
}

/// Most events on their way to the JS thread; the engine's own queue (1,024) is in front.
const EVENT_QUEUE: usize = 1024;

impl Wake {
    /// A channel not yet connected to the JS thread: wakes are queued and not signalled.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            ready: Mutex::new(Vec::new()),
            scheduled: AtomicBool::new(false),
            tsfn: Mutex::new(None),
            events: Mutex::new(None),
            events_dropped: AtomicU64::new(0),
            exit_hook: Mutex::new(None),
        })
    }

    /// Connects the channels to `inner`, on the JS thread of `js`. They start unref'd.
    pub(crate) fn connect(self: &Arc<Self>, js: Js, inner: Context) -> Result<()> {
        let tsfn = channel(js, "herdless.wake", 0, inner.clone(), drain_on_js_thread)?;
        *self.tsfn.lock().unwrap_or_else(|e| e.into_inner()) = Some(tsfn);
        let events = channel(
            js,
            "herdless.events",
            EVENT_QUEUE,
            inner,
            event_on_js_thread,
        )?;
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) = Some(events);
        // Registered after the thread-safe function's own hook, so it runs before it.
        let arg = Arc::into_raw(self.clone());
        // SAFETY: JS thread; `arg` is reclaimed by `on_env_exit` or by `close`.
        let status = unsafe {
            sys::napi_add_env_cleanup_hook(js.raw(), Some(on_env_exit), arg.cast_mut().cast())
        };
        if status == sys::Status::napi_ok {
            *self.exit_hook.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(ExitHook { env: js.raw(), arg });
        } else {
            // SAFETY: not registered, so still ours.
            drop(unsafe { Arc::from_raw(arg) });
        }
        Ok(())
    }

    /// A waker for call `id`.
    pub(crate) fn waker(self: &Arc<Self>, id: u64) -> Waker {
        Waker::from(Arc::new(CallWaker {
            id,
            wake: self.clone(),
        }))
    }

    fn wake(&self, id: u64) {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id);
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            let tsfn = self.tsfn.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = &*tsfn {
                // SAFETY: a live handle (released only under this lock). Non-blocking with
                // an unbounded queue: it cannot fail but by closing, when nothing waits.
                unsafe {
                    sys::napi_call_threadsafe_function(
                        t.0,
                        ptr::null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    )
                };
            }
        }
    }

    /// Hands `event` to the JS thread, from any thread, without waiting: dropped (and
    /// counted) when the channel's queue is full, dropped silently once it is closed (the
    /// cache is going away).
    pub(crate) fn send_event(&self, event: herdless::Event) {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = &*events else { return };
        let data = Box::into_raw(Box::new(event));
        // SAFETY: a live handle (released only under this lock); `data` is the callback's
        // to free once the call is queued.
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                t.0,
                data.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if status != sys::Status::napi_ok {
            // SAFETY: not queued, so still ours.
            drop(unsafe { Box::from_raw(data) });
            if status == sys::Status::napi_queue_full {
                self.events_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Events dropped because the events' channel was full.
    pub(crate) fn events_dropped(&self) -> u64 {
        self.events_dropped.load(Ordering::Relaxed)
    }

    /// The ids woken since the last call. Clears the "scheduled" mark first, so a wake that
    /// lands meanwhile schedules another drain rather than being lost.
    pub(crate) fn take_ready(&self) -> Vec<u64> {
        self.scheduled.store(false, Ordering::Release);
        std::mem::take(&mut *self.ready.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Keeps the process alive (or not) for the sake of waiting calls. JS thread only.
    pub(crate) fn keep_alive(&self, js: Js, on: bool) {
        let tsfn = self.tsfn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = &*tsfn {
            // SAFETY: JS thread, live handle.
            unsafe {
                if on {
                    sys::napi_ref_threadsafe_function(js.raw(), t.0);
                } else {
                    sys::napi_unref_threadsafe_function(js.raw(), t.0);
                }
            }
        }
    }

    /// Releases the channel (the cache is going away). Wakes after this are ignored. JS
    /// thread only.
    pub(crate) fn close(&self) {
        if let Some(hook) = self
            .exit_hook
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            // SAFETY: JS thread; the hook was registered with exactly these arguments and
            // has not run (it takes itself out first), so `arg` is still the leaked `Arc`.
            unsafe {
                sys::napi_remove_env_cleanup_hook(
                    hook.env,
                    Some(on_env_exit),
                    hook.arg.cast_mut().cast(),
                );
                drop(Arc::from_raw(hook.arg));
            }
        }
        self.release();
    }

    fn release(&self) {
        for channel in [&self.tsfn, &self.events] {
            let mut tsfn = channel.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = tsfn.take() {
                // SAFETY: the handle is live until this release, and is never used after it.
                unsafe {
                    sys::napi_release_threadsafe_function(
                        t.0,
                        sys::ThreadsafeFunctionReleaseMode::abort,
                    )
                };
            }
        }
    }
}

/// The JS-thread callback of a thread-safe function.
type CallJs = unsafe extern "C" fn(sys::napi_env, sys::napi_value, *mut c_void, *mut c_void);

/// A thread-safe function of `inner` (its context, freed by `finalize`), unref'd, whose
/// queue holds at most `queue` calls (0: unbounded).
fn channel(js: Js, name: &str, queue: usize, inner: Context, call_js: CallJs) -> Result<Tsfn> {
    let name = js.string(name)?;
    let context = Box::into_raw(Box::new(inner)).cast::<c_void>();
    let mut tsfn = ptr::null_mut();
    // SAFETY: JS thread (module rule); `context` is freed by `finalize` exactly once.
    let status = unsafe {
        sys::napi_create_threadsafe_function(
            js.raw(),
            ptr::null_mut(),
            ptr::null_mut(),
            name,
            queue,
            1,
            context,
            Some(finalize),
            context,
            Some(call_js),
            &mut tsfn,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: not handed to Node-API, so still ours.
        drop(unsafe { Box::from_raw(context.cast::<Context>()) });
        return Err(napi::Error::from_reason(
            "cannot create a channel to the JS thread",
        ));
    }
    // SAFETY: JS thread, live handle.
    unsafe { sys::napi_unref_threadsafe_function(js.raw(), tsfn) };
    Ok(Tsfn(tsfn))
}

struct CallWaker {
    id: u64,
    wake: Arc<Wake>,
}

impl WakeTrait for CallWaker {
    fn wake(self: Arc<Self>) {
        self.wake.wake(self.id);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake.wake(self.id);
    }
}

unsafe extern "C" fn drain_on_js_thread(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    // A null env: the function is being torn down; there is nothing left to wake.
    if env.is_null() || context.is_null() {
        return;
    }
    // SAFETY: `context` is the `Context` boxed in `channel`, freed only by `finalize`,
    // which Node-API runs after the last call of this callback.
    let inner = unsafe { &*context.cast::<Context>() };
    if let Some(inner) = inner.upgrade() {
        inner.woken(Js(env));
    }
}

/// The events channel's callback on the JS thread (see [`Wake::send_event`]).
unsafe extern "C" fn event_on_js_thread(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    data: *mut c_void,
) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the box queued by `Wake::send_event`, handed to this callback once
    // (also when the channel is torn down: then `env` is null and it is only freed).
    let event = unsafe { Box::from_raw(data.cast::<Event>()) };
    if env.is_null() || context.is_null() {
        return;
    }
    // SAFETY: `context` is the `Context` boxed in `channel`, freed only by `finalize`,
    // which Node-API runs after the last call with an env.
    let inner = unsafe { &*context.cast::<Context>() };
    if let Some(inner) = inner.upgrade() {
        inner.event(Js(env), *event);
    }
}

unsafe extern "C" fn on_env_exit(arg: *mut c_void) {
    // SAFETY: `arg` is the `Arc` leaked in `connect`; `close` removes the hook before it
    // reclaims the `Arc`, so when this runs the `Arc` is still leaked and ours to take.
    let wake = unsafe { Arc::from_raw(arg.cast_const().cast::<Wake>()) };
    wake.exit_hook
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    wake.release();
}

unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the box made in `channel`; Node-API finalizes once.
    drop(unsafe { Box::from_raw(data.cast::<Context>()) });
}
