//! JSON from the response bytes: parsed with the interpreter lock released into a light tree that
//! borrows unescaped strings from the body (objects are ordered vectors: no hashing, few allocations),
//! then turned into Python objects with a cache of object keys.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use pyo3::prelude::*;
use pyo3::ffi;
use pyo3::types::{PyBool, PyDict, PyFloat, PyString};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

pub enum Json<'a> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(Cow<'a, str>),
    Arr(Vec<Json<'a>>),
    Obj(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// A string that borrows from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Json<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Json::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Json::I64(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Json::U64(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Json::F64(v))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    v.push(item);
                }
                Ok(Json::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some((k, item)) = map.next_entry::<Str<'de>, Json<'de>>()? {
                    v.push((k.0, item));
                }
                Ok(Json::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}

pub fn parse(data: &[u8]) -> Result<Json<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(data);
    let v = Json::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Object keys repeat a lot (arrays of records): each distinct short key becomes one Python str,
/// reused everywhere (no new allocation; its hash is computed once).
pub struct ToPy<'py, 'a> {
    py: Python<'py>,
    keys: HashMap<&'a str, Bound<'py, PyString>>,
}

impl<'py, 'a> ToPy<'py, 'a> {
    pub fn new(py: Python<'py>) -> Self {
        ToPy { py, keys: HashMap::new() }
    }

    fn key(&mut self, k: &'a str) -> Bound<'py, PyString> {
        if k.len() > 48 {
            return PyString::new(self.py, k);
        }
        if let Some(s) = self.keys.get(k) {
            return s.clone();
        }
        let s = PyString::new(self.py, k);
        if self.keys.len() < 4096 {
            self.keys.insert(k, s.clone());
        }
        s
    }

    pub fn convert(&mut self, v: &'a Json<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Json::Null => py.None().into_bound(py),
            Json::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Json::I64(i) => i.into_pyobject(py)?.into_any(),
            Json::U64(u) => u.into_pyobject(py)?.into_any(),
            Json::F64(f) => PyFloat::new(py, *f).into_any(),
            Json::Str(s) => PyString::new(py, s).into_any(),
            Json::Arr(a) => {
                // Filled in place: no intermediate Vec of the items.
                // SAFETY: PyList_New returns a new reference (or NULL with an exception set); each
                // PyList_SetItem steals the item's reference into a slot of that fresh list. A list
                // left part-filled by an error holds NULLs, which its deallocation skips.
                let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(a.len() as ffi::Py_ssize_t))? };
                for (i, item) in a.iter().enumerate() {
                    let obj = self.convert(item)?;
                    unsafe { ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, obj.into_ptr()) };
                }
                list
            }
            Json::Obj(m) => {
                let d = PyDict::new(py);
                for (k, item) in m {
                    let key = self.key(k);
                    d.set_item(key, self.convert(item)?)?;
                }
                d.into_any()
            }
        })
    }
}

/// Pauses the cyclic garbage collector while a large JSON value is built (restored on drop, also
/// on error). Why: every container created counts towards a collection, and a 1 MB document
/// triggers hundreds of them, each scanning the young objects just made; a fresh JSON value holds
/// no reference cycles, so those scans find nothing. The interpreter lock is held throughout, so
/// no other Python code runs while the collector is paused.
pub struct GcPause(bool);

impl GcPause {
    pub fn new(_py: Python<'_>) -> GcPause {
        // SAFETY: the GIL is held (the `Python` token); PyGC_Disable returns the previous state
        GcPause(unsafe { ffi::PyGC_Disable() } == 1)
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: created under the GIL and dropped in the same scope, still holding it
            unsafe { ffi::PyGC_Enable() };
        }
    }
}
