//! XFetch study: a hot key under the xfetch strategy for one `beta`. With beta = 0 it
//! expires like any key; with beta >= 1 one reader refreshes it before expiry and readers
//! never miss; a larger beta refreshes earlier (more origin calls per TTL).

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::hot_key::HotKey;
use super::setup::Setup;
use crate::origin::OriginConfig;
use crate::report::human;
use crate::strategy::Knobs;
use crate::world::World;

/// Parameters of the XFetch study (a hot key; `knobs.beta` is the beta studied).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct XfetchStudy {
    /// The hot key's traffic, origin and options.
    pub hot: HotKey,
}

impl Setup for XfetchStudy {
    fn name(&self) -> &'static str {
        "xfetch-study"
    }
    fn variant(&self) -> String {
        format!("beta {}", self.hot.knobs.beta)
    }
    fn knobs(&self) -> Knobs {
        self.hot.knobs.clone()
    }
    fn origin(&self) -> OriginConfig {
        self.hot.origin.clone()
    }
    fn duration(&self) -> Duration {
        self.hot.duration
    }
    fn title(&self) -> String {
        format!(
            "XFetch study: hot key at {} req/s, load {}, TTL {}",
            self.hot.rate,
            human(self.hot.origin.load_time),
            human(self.hot.knobs.ttl)
        )
    }
    fn start(&self, w: &Rc<World>) {
        self.hot.start(w)
    }
}
