//! Request bodies as the Python layer hands them over: bytes, or a function returning the next piece
//! (bytes; None at the end) of a file or iterable, read while the request is sent. The direct path
//! calls that function itself between writes (`direct::BodyStream`); reqwest's path gets the pieces
//! through a bounded channel fed from the calling thread (`ChannelBody`, `feed`), since reqwest sends
//! from its runtime's thread, which never calls into Python.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::sync::mpsc;

use crate::bytes_from_py;

pub enum PyBody {
    Bytes(Bytes),
    Stream(Py<PyAny>),
}

pub fn py_body(body: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PyBody>> {
    let Some(b) = body.filter(|b| !b.is_none()) else { return Ok(None) };
    if let Ok(bytes) = b.cast::<PyBytes>() {
        return Ok(Some(PyBody::Bytes(bytes_from_py(bytes))));
    }
    if b.is_callable() {
        return Ok(Some(PyBody::Stream(b.clone().unbind())));
    }
    Err(PyValueError::new_err("body must be bytes, or a function returning its next piece as bytes (None at the end)"))
}

pub fn next_piece(py: Python<'_>, f: &Py<PyAny>) -> PyResult<Option<Bytes>> {
    let piece = f.bind(py).call0()?;
    if piece.is_none() {
        return Ok(None);
    }
    let bytes = piece.cast::<PyBytes>().map_err(|_| PyTypeError::new_err("a piece of a streamed body must be bytes"))?;
    Ok(Some(bytes_from_py(bytes)))
}

/// All the pieces, joined (where a body cannot be streamed: `AsyncClient`, whose caller is the event loop).
pub fn drain_pieces(py: Python<'_>, f: &Py<PyAny>) -> PyResult<Bytes> {
    let mut out = Vec::new();
    while let Some(piece) = next_piece(py, f)? {
        out.extend_from_slice(&piece);
    }
    Ok(Bytes::from(out))
}

/// Pieces in flight between the calling thread and the request, at most: a body is never read far
/// ahead of what the connection takes.
const IN_FLIGHT: usize = 4;

/// A request body whose pieces arrive through a channel; an `Err` piece aborts the request.
pub struct ChannelBody(mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        self.0.poll_recv(cx).map(|piece| piece.map(|r| r.map(http_body::Frame::data)))
    }
}

/// A body for reqwest and the sender `feed` fills it through.
pub fn channel() -> (reqwest::Body, mpsc::Sender<Result<Bytes, std::io::Error>>) {
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    (reqwest::Body::wrap(ChannelBody(rx)), tx)
}

/// Read the pieces of `f` on the calling thread and send them (the interpreter lock released while
/// waiting for room) until the end, or until the request stops taking them (it ended: its outcome
/// says why). A Python exception aborts the body and is returned, to be raised as it is.
pub fn feed(py: Python<'_>, f: &Py<PyAny>, tx: mpsc::Sender<Result<Bytes, std::io::Error>>) -> PyResult<()> {
    loop {
        let piece = match next_piece(py, f) {
            Ok(Some(piece)) => Ok(piece),
            Ok(None) => return Ok(()),
            Err(e) => {
                let abort = Err(std::io::Error::other("reading the request body failed"));
                let _ = py.detach(|| tx.blocking_send(abort));
                return Err(e);
            }
        };
        if py.detach(|| tx.blocking_send(piece)).is_err() {
            return Ok(());
        }
    }
}
