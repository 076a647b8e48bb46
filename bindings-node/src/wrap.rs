//! `cache.wrap(fn, options)`: memoising an async function under canonical keys.

use std::rc::Rc;
use std::time::Duration;

use herdless::{KeyBuilder, Param};
use napi::bindgen_prelude::{FunctionCallContext, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::call::rejecting;
use crate::call::{Answer, CallOptions, Loader};
use crate::driver::Inner;
use crate::errors::type_error;
use crate::js::{Js, RawValue, Ref, Type, Value};
use crate::keys::{build, is_plain_object, param, params, version};
use crate::options;

/// Options of `cache.wrap(fn, options)`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct WrapOptions {
    /// Key namespace (default: the cache's `namespace` option; one of the two is required).
    pub namespace: Option<String>,
    /// Key entity (default: the function's name).
    pub entity: Option<String>,
    /// Schema version of the cached representation (default 1).
    pub version: Option<u32>,
    /// TTL in milliseconds of the memoised results (default: the cache's).
    pub ttl: Option<f64>,
    /// Time-to-idle in milliseconds of the memoised results (default: the cache's): a
    /// result nobody asks for that long is dropped.
    pub tti: Option<f64>,
    /// Maps the arguments to the key's id (a key value) or to `{ id?, params? }`.
    #[napi(
        ts_type = "(...args: any[]) => KeyValue | { id?: KeyValue; params?: Record<string, KeyValue> }"
    )]
    pub key: Option<()>,
    /// The tags of each memoised result (`invalidateTag` of one drops it): an array of
    /// strings, or a function of the call's arguments (with its `this`) returning one,
    /// called only when a result is loaded.
    #[napi(ts_type = "readonly string[] | ((...args: any[]) => readonly string[])")]
    pub tags: Option<()>,
}

/// `wrap`'s `tags` option.
enum Tags {
    Fixed(Rc<[String]>),
    Of(Ref),
}

/// What every call of one wrapped function shares.
struct Wrapped {
    inner: Rc<Inner>,
    func: Ref,
    namespace: String,
    entity: String,
    version: u32,
    ttl: Option<Duration>,
    tti: Option<Duration>,
    key: Option<Ref>,
    tags: Option<Tags>,
}

fn string_option(js: Js, obj: Option<Value>, name: &str) -> Result<Option<String>> {
    let Some(obj) = obj else { return Ok(None) };
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::String => Ok(Some(js.get_string(v)?)),
        t => Err(type_error(
            js,
            &format!("wrap option `{name}` must be a string, got {}", t.name()),
        )),
    }
}

impl Wrapped {
    fn builder(&self) -> KeyBuilder {
        KeyBuilder::new(&self.namespace)
            .version(self.version)
            .entity(&self.entity)
    }

    /// The key of one call with `args`.
    fn key(&self, js: Js, args: &[Value]) -> Result<String> {
        let mut b = self.builder();
        if let Some(f) = &self.key {
            let spec = match js.call(f.get(js)?, js.undefined()?, args)? {
                Ok(v) => v,
                Err(thrown) => return Err(js.throw(thrown)),
            };
            if is_plain_object(js, spec)? {
                for name in js.keys(spec)? {
                    if name != "id" && name != "params" {
                        return Err(type_error(
                            js,
                            &format!(
                                "wrap `key` returned an object with `{name}`: only `id` and `params` are allowed"
                            ),
                        ));
                    }
                }
                let id = js.get(spec, "id")?;
                if js.type_of(id)? != Type::Undefined {
                    b = b.id(param(js, id, "key `id`")?);
                }
                let p = js.get(spec, "params")?;
                if js.type_of(p)? != Type::Undefined {
                    if !is_plain_object(js, p)? {
                        return Err(type_error(js, "key `params` must be a plain object"));
                    }
                    b = params(js, b, p)?;
                }
            } else {
                b = b.id(param(js, spec, "the key")?);
            }
            return build(js, &b);
        }
        match args {
            [] => {}
            [one] if is_plain_object(js, *one)? => b = params(js, b, *one)?,
            [one] if js.type_of(*one)? == Type::Object && !js.is_array(*one)? => {
                return Err(type_error(
                    js,
                    "a wrapped function's argument is an object that is not plain: give wrap a `key` option",
                ));
            }
            [one] => b = b.id(param(js, *one, "the argument")?),
            many => {
                // The count as id keeps this apart from the one-object form.
                b = b.id(Param::Int(many.len() as i128));
                for (i, a) in many.iter().enumerate() {
                    b = b.param(&i.to_string(), param(js, *a, &format!("argument {i}"))?);
                }
            }
        }
        build(js, &b)
    }

    fn call(&self, js: Js, ctx: &FunctionCallContext) -> Result<Value> {
        let args = (0..ctx.length())
            .map(|i| ctx.get::<Unknown>(i).map(|u| u.raw()))
            .collect::<Result<Vec<_>>>()?;
        let key = self.key(js, &args)?;
        let inner = &self.inner;
        inner.fold_front();
        let first = inner.l1.lookup(&key);
        if let Some((v, _)) = inner.hit_now(js, &first)? {
            return js.resolved(v);
        }
        let this = ctx.this::<Unknown>()?.raw();
        let tags = match &self.tags {
            None => None,
            Some(Tags::Fixed(t)) => Some(Rc::clone(t)),
            Some(Tags::Of(f)) => match js.call(f.get(js)?, this, &args)? {
                Ok(t) => {
                    Some(crate::tags::tag_list(js, t, "wrap's `tags` function result")?.into())
                }
                Err(e) => return Err(js.throw(e)),
            },
        };
        let loader = Loader::bound(js, self.func.get(js)?, this, &args)?;
        let (deferred, promise) = js.promise()?;
        let options = CallOptions {
            ttl: self.ttl,
            tti: self.tti,
            tags,
            signal: None,
        };
        inner.start(js, key, loader, options, Answer::Promise(deferred), first)?;
        Ok(promise)
    }
}

/// `cache.wrap(fn, options)`.
pub(crate) fn wrap(js: Js, inner: &Rc<Inner>, func: Value, opts: Option<Value>) -> Result<Value> {
    if js.type_of(func)? != Type::Function {
        return Err(type_error(js, "wrap expects a function"));
    }
    let namespace = match string_option(js, opts, "namespace")?.or_else(|| inner.namespace.clone())
    {
        Some(ns) => ns,
        None => {
            return Err(type_error(
                js,
                "wrap needs `namespace` (an option of wrap or of the cache)",
            ));
        }
    };
    let entity = match string_option(js, opts, "entity")? {
        Some(e) => e,
        None => js.get_string(js.get(func, "name")?)?,
    };
    if entity.is_empty() {
        return Err(type_error(
            js,
            "wrap needs `entity`: the function has no name",
        ));
    }
    let (mut ver, mut ttl, mut tti, mut key, mut tags) = (1, None, None, None, None);
    if let Some(o) = opts {
        let t = js.get(o, "tags")?;
        tags = match js.type_of(t)? {
            Type::Undefined => None,
            Type::Function => Some(Tags::Of(js.reference(t)?)),
            _ => Some(Tags::Fixed(
                crate::tags::tag_list(js, t, "wrap option `tags`")?.into(),
            )),
        };
        ver = version(js, o)?.unwrap_or(1);
        ttl = options::ttl(js, o)?;
        tti = options::tti(js, o)?;
        let k = js.get(o, "key")?;
        match js.type_of(k)? {
            Type::Undefined => {}
            Type::Function => key = Some(js.reference(k)?),
            t => {
                return Err(type_error(
                    js,
                    &format!("wrap option `key` must be a function, got {}", t.name()),
                ));
            }
        }
    }
    let wrapped = Wrapped {
        inner: Rc::clone(inner),
        func: js.reference(func)?,
        namespace,
        entity,
        version: ver,
        ttl,
        tti,
        key,
        tags,
    };
    // Check the namespace and entity now rather than at the first call.
    build(js, &wrapped.builder())?;
    let name = format!("cached {}", wrapped.entity);
    let env = napi::Env::from_raw(js.raw());
    let f = env.create_function_from_closure::<Value, _, _>(&name, move |ctx| {
        let js = Js(ctx.env.raw());
        let r = wrapped.call(js, &ctx);
        rejecting(js, r).map(RawValue)
    })?;
    Ok(f.raw())
}
