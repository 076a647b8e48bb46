//! The `detector` option: the stampede detector's thresholds.

use std::time::Duration;

use napi::Result;

use super::read::{bad, count, duration, number};
use crate::js::{ErrorKind, Js, Type, Value};

const DETECTOR: [&str; 8] = [
    "tick",
    "spikeFactor",
    "minSpikeMisses",
    "latencyFactor",
    "latencyWindow",
    "minSamples",
    "keyShare",
    "hold",
];

/// The `detector` option, with `detectorTick` (which wins for the tick when both are given).
pub(super) fn detector(
    js: Js,
    obj: Value,
    tick: Option<Duration>,
) -> Result<Option<herdless::DetectorOptions>> {
    let v = js.get(obj, "detector")?;
    let mut o = herdless::DetectorOptions::default();
    match js.type_of(v)? {
        Type::Undefined if tick.is_none() => return Ok(None),
        Type::Undefined => {}
        Type::Boolean if !js.get_bool(v)? => return Ok(Some(herdless::DetectorOptions::off())),
        Type::Boolean => {}
        Type::Object if !js.is_array(v)? => {
            for key in js.keys(v)? {
                if !DETECTOR.contains(&key.as_str()) {
                    return Err(bad(
                        js,
                        ErrorKind::Type,
                        &format!(
                            "unknown detector option `{key}` (known: {})",
                            DETECTOR.join(", ")
                        ),
                    ));
                }
            }
            // Read as `detector.<name>`, so a message names the option in full.
            let field = js.object()?;
            for key in DETECTOR {
                js.set(field, &format!("detector.{key}"), js.get(v, key)?)?;
            }
            let name = |key: &str| format!("detector.{key}");
            if let Some(d) = duration(js, field, &name("tick"), false)? {
                o.tick = d;
            }
            if let Some(d) = duration(js, field, &name("latencyWindow"), false)? {
                o.latency_window = d;
            }
            if let Some(d) = duration(js, field, &name("hold"), true)? {
                o.hold = d;
            }
            if let Some(n) = number(js, field, &name("spikeFactor"))? {
                o.spike_factor = n;
            }
            if let Some(n) = number(js, field, &name("latencyFactor"))? {
                o.latency_factor = n;
            }
            if let Some(n) = number(js, field, &name("keyShare"))? {
                o.key_share = n;
            }
            if let Some(n) = count(js, field, &name("minSpikeMisses"))? {
                o.min_spike_misses = n;
            }
            if let Some(n) = count(js, field, &name("minSamples"))? {
                o.min_samples = n;
            }
        }
        t => {
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!(
                    "option `detector` must be a boolean or an object, got {}",
                    t.name()
                ),
            ));
        }
    }
    if let Some(t) = tick {
        o.tick = t;
    }
    Ok(Some(o))
}
