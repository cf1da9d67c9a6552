//! What every connection loop shares, whatever its protocol: taking the next intended request from
//! the schedule, waiting for its time, reconnecting with back-off, and the end-of-run accounting
//! that files every request the run intended but did not finish as `unfinished`.

use std::cell::{RefCell, RefMut};
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::recording::{Outcome, Recorder};
use crate::requests::{Chooser, Pick};
use crate::schedule::Pacer;
use crate::timer::PreciseTimer;
use crate::transport::ConnectTimes;

/// Back-off between reconnect attempts: 10 ms doubling up to 1 s.
struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    fn next(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(1));
        d
    }
}

fn at(t: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(t)
}

/// One connection's share of the run.
pub struct Driver {
    pacer: Pacer,
    rec: Rc<RefCell<Recorder>>,
    /// The next intended time taken from the schedule but not yet given out.
    next: Option<Instant>,
    pub end: Instant,
    pub stop: Instant,
    connect_timeout: Duration,
    backoff: Backoff,
    timer: PreciseTimer,
    /// `--requests`: which entry each request sends, and the pick of the request taken last.
    requests: Option<Chooser>,
    current: Option<Pick>,
}

impl Driver {
    pub fn new(pacer: Pacer, rec: Rc<RefCell<Recorder>>, connect_timeout: Duration) -> Driver {
        let w = rec.borrow().window().cloned().expect("a run's recorder has a window");
        Driver { pacer, rec, next: None, end: w.end, stop: w.stop, connect_timeout, backoff: Backoff(Backoff::FIRST), timer: PreciseTimer::new(), requests: None, current: None }
    }

    /// The recorder, set to file under the label of the request taken last (`--requests`).
    pub fn rec(&self) -> RefMut<'_, Recorder> {
        let mut r = self.rec.borrow_mut();
        r.set_label(self.current.map(|p| p.label));
        r
    }

    /// Vary the requests (`--requests`): every request taken picks its entry.
    pub fn set_requests(&mut self, chooser: Option<Chooser>) {
        self.requests = chooser;
    }

    /// The entry of the request taken last (`None` without `--requests`).
    pub fn pick(&self) -> Option<Pick> {
        self.current
    }

    /// The `--requests` entries this driver picks from.
    pub fn request_set(&self) -> Option<&std::sync::Arc<crate::requests::RequestSet>> {
        self.requests.as_ref().map(Chooser::set)
    }

    pub fn closed_loop(&self) -> bool {
        matches!(self.pacer, Pacer::Max)
    }

    /// Intended time of the next request (now, in closed loop); `None` once the end has come or
    /// nothing more is due before it.
    pub fn peek(&mut self) -> Option<Instant> {
        let now = Instant::now();
        if now >= self.end {
            return None;
        }
        let t = match &mut self.pacer {
            Pacer::Max => now,
            Pacer::Scheduled(s) => *self.next.get_or_insert_with(|| s.next().unwrap_or(self.end)),
        };
        (t < self.end).then_some(t)
    }

    /// Take the next request: its intended time (call after [`Driver::peek`] said there is one).
    pub fn take(&mut self) -> Instant {
        let t = match self.pacer {
            // Closed loop: the request is intended when it is taken (peek may be long before).
            Pacer::Max => Instant::now(),
            Pacer::Scheduled(_) => self.next.take().expect("peek() found a request due"),
        };
        self.next = None;
        self.current = self.requests.as_mut().map(Chooser::next_pick);
        t
    }

    /// Sleep until `t` (no-op when it is past), to within microseconds.
    pub async fn wait_until(&self, t: Instant) {
        self.timer.sleep_until(t).await;
    }

    /// The connection worked: the next failure backs off from the start again.
    pub fn connected_ok(&mut self) {
        self.backoff = Backoff(Backoff::FIRST);
    }

    /// After a failure, pause before trying again (never past the end).
    pub async fn back_off(&mut self) {
        let wake = (Instant::now() + self.backoff.next()).min(self.end);
        tokio::time::sleep_until(at(wake)).await;
    }

    /// Open a new connection. A failed attempt is the outcome of the request it was for (the next
    /// one due), then the driver backs off; `None` when the attempt failed or the run ended.
    pub async fn reconnect<C, E, F>(&mut self, connect: F) -> Option<C>
    where
        F: Future<Output = Result<(C, ConnectTimes), E>>,
    {
        let deadline = (Instant::now() + self.connect_timeout).min(self.end);
        match tokio::time::timeout_at(at(deadline), connect).await {
            Ok(Ok((c, times))) => {
                self.rec().connected(times);
                Some(c)
            }
            _ => {
                if Instant::now() < self.end && self.peek().is_some() {
                    let intended = self.take();
                    self.rec().failed(Outcome::ConnectError, intended);
                }
                self.back_off().await;
                None
            }
        }
    }

    /// The run stopped: `in_flight` requests (intended, sent) and every request due before the
    /// end that was never sent are unfinished.
    pub fn finish(mut self, in_flight: impl IntoIterator<Item = (Instant, Instant)>) {
        let mut rec = self.rec.borrow_mut();
        rec.set_label(self.current.map(|p| p.label));
        for (intended, sent) in in_flight {
            rec.unfinished(intended, Some(sent));
        }
        if let Pacer::Scheduled(s) = &mut self.pacer {
            let mut next = self.next.take().or_else(|| s.next());
            while let Some(t) = next.filter(|t| *t < self.end) {
                rec.set_label(self.requests.as_mut().map(|c| c.next_pick().label));
                rec.unfinished(t, None);
                next = s.next();
            }
        }
    }
}
