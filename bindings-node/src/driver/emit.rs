//! The engine's events told to the JS listeners (`cache.on(...)`, `crate::events`), on the
//! JS thread the events' channel (`crate::wake`) brings them to.

use herdless::Event;
use napi::Result;

use super::Inner;
use crate::errors;
use crate::events::Name;
use crate::js::Js;

impl Inner {
    /// Mutes the engine's listener when no JS listener is left, unmutes it otherwise.
    pub(crate) fn listening_changed(&self) {
        self.l1.set_listening(!self.listeners.is_empty());
    }

    /// Tells `event` to the JS listeners of its kind. JS thread.
    pub(super) fn emit(&self, js: Js, event: Event) -> Result<()> {
        let Some(name) = Name::of(event.kind) else {
            return Ok(());
        };
        let fs = self.listeners.take(js, name)?;
        if fs.is_empty() {
            return Ok(());
        }
        self.listening_changed();
        let obj = js.object()?;
        js.set(obj, "kind", js.string(name.as_str())?)?;
        js.set(obj, "key", js.string(&event.key)?)?;
        if let Some(e) = &event.error {
            js.set(obj, "error", errors::to_js(js, &self.table, e)?)?;
        }
        let this = js.undefined()?;
        for f in fs {
            if let Err(thrown) = js.call(f, this, &[obj])? {
                let why = crate::js::describe(js, thrown);
                let message = format!(
                    "herdless: a listener of '{}' threw (the error is not rethrown): {why}",
                    name.as_str()
                );
                // A warning that cannot be shown must not stop the other listeners.
                let _ = crate::codec::warn(js, &message);
            }
        }
        Ok(())
    }
}
