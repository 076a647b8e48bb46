//! `getOrLoadMany`: the call machine's batch ([`CallMany`]) as a task of the cache's table.
//! The machine decides everything (which keys to load, wait for or read from the shared
//! tier, loader calls of at most `maxBatch` keys, their hard timeout, batched background
//! refreshes); this starts it and answers an array in the order of the keys, or rejects
//! with a `BatchError` (code `HERDLESS_BATCH`) naming each failed key.

use std::rc::Rc;

use herdless_redis::call::CallMany;
use herdless_redis::two_tier::ManyAnswer;
use napi::Result;

use super::{Inner, Raise, State, Task};
use crate::call::{Answer, CallOptions};
use crate::errors;
use crate::js::{ErrorKind, Js, Value};
use crate::value::Val;

impl Inner {
    /// Starts `getOrLoadMany(keys, loader)`, answered through `answer`.
    pub(crate) fn start_many(
        self: &Rc<Self>,
        js: Js,
        keys: Vec<String>,
        loader: Value,
        options: CallOptions,
        answer: Answer,
    ) -> Result<()> {
        let loader = Rc::new(js.reference(loader)?);
        self.begin(js, answer, options.signal, || {
            let many = CallMany::new(&self.tt, &keys, loader);
            Ok(State::Many(Box::new(many), keys))
        })
    }

    /// Answers the batch's caller: the array of values (`undefined` for an absence), or a
    /// `BatchError` when some keys failed.
    pub(super) fn reply_many(
        &self,
        js: Js,
        task: &mut Task,
        r: std::result::Result<Vec<ManyAnswer<Val>>, Raise>,
    ) -> Result<()> {
        if !task.answer.waiting() {
            return Ok(());
        }
        let answers = match r {
            Ok(answers) => answers,
            Err(x) => {
                let err = self.raised(js, x)?;
                return self.settle(js, task, Err(err));
            }
        };
        let keys = match &mut task.state {
            State::Many(_, keys) => std::mem::take(keys),
            _ => Vec::new(),
        };
        let values = js.array(answers.len())?;
        let errors = js.object()?;
        let mut failed = 0;
        for (i, a) in answers.iter().enumerate() {
            let v = match a {
                Ok(Some(v)) => self.table.load(js, v)?,
                Ok(None) => js.undefined()?,
                Err(e) => {
                    failed += 1;
                    let err = errors::to_js(js, &self.table, e)?;
                    if let Some(k) = keys.get(i) {
                        js.set(errors, k, err)?;
                    }
                    err
                }
            };
            js.set_element(values, i as u32, v)?;
        }
        if failed == 0 {
            return self.settle(js, task, Ok(values));
        }
        let message = format!("{failed} of the {} keys failed", answers.len());
        let err = js.error(ErrorKind::Error, errors::code::BATCH, &message)?;
        js.set(err, "name", js.string("BatchError")?)?;
        js.set(err, "errors", errors)?;
        js.set(err, "values", values)?;
        self.settle(js, task, Err(err))
    }
}
