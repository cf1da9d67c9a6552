//! Waking at a request's intended send time to within microseconds.
//!
//! tokio's timer wheel has a 1 ms resolution, so sends paced with it bunch into 1 ms bursts and up
//! to ~1 ms of the engine's own lateness lands in corrected latency. On Linux each connection gets a
//! timerfd armed with the absolute `CLOCK_MONOTONIC` instant, registered in the same epoll as the
//! sockets: the thread sleeps until then and wakes within the kernel's timer slack (set to 1 ns
//! for the engine's threads). Written by hand on `libc`: tokio has no high-resolution timer and no
//! maintained crate puts a timerfd on tokio's reactor. Elsewhere, or when no timerfd can be made
//! (file-descriptor limit), it falls back to tokio's timer.

use std::time::{Duration, Instant};

/// Waits shorter than this are not worth a timer: the request goes now.
const SPIN_BELOW: Duration = Duration::from_micros(20);

/// One connection's wake-up timer.
pub struct PreciseTimer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

/// Make the calling thread's timers precise (Linux timer slack of 1 ns; default 50 µs).
pub fn precise_thread_timers() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer and changes only this thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

impl PreciseTimer {
    /// A timer for the current tokio runtime's thread.
    pub fn new() -> PreciseTimer {
        #[cfg(target_os = "linux")]
        {
            PreciseTimer { fd: linux::timerfd().ok() }
        }
        #[cfg(not(target_os = "linux"))]
        {
            PreciseTimer {}
        }
    }

    /// Sleep until `t` (returns at once when it is past or within a few microseconds).
    pub async fn sleep_until(&self, t: Instant) {
        let now = Instant::now();
        if t <= now + SPIN_BELOW {
            return;
        }
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            if linux::wait(fd, t - now).await.is_ok() && Instant::now() >= t {
                return;
            }
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await;
    }
}

impl Default for PreciseTimer {
    fn default() -> Self {
        PreciseTimer::new()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    use tokio::io::unix::AsyncFd;

    pub fn timerfd() -> io::Result<AsyncFd<OwnedFd>> {
        // SAFETY: timerfd_create returns a new descriptor (or -1), which OwnedFd then owns.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the OwnedFd is moved into the AsyncFd, which deregisters it before closing it.
        unsafe { AsyncFd::register(OwnedFd::from_raw_fd(fd)) }.map_err(|e| e.into())
    }

    /// Arm the timer `wait` from now (absolute CLOCK_MONOTONIC, the clock of std's Instant) and
    /// wait for it to fire.
    pub async fn wait(fd: &AsyncFd<OwnedFd>, wait: Duration) -> io::Result<()> {
        let raw = fd.get_ref().as_raw_fd();
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into the timespec we own.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let nanos = now.tv_nsec as u64 + wait.subsec_nanos() as u64;
        let at = libc::timespec {
            tv_sec: now.tv_sec + wait.as_secs() as libc::time_t + (nanos / 1_000_000_000) as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: at };
        // SAFETY: the descriptor is a timerfd we own; spec lives for the call.
        if unsafe { libc::timerfd_settime(raw, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut guard = fd.readable().await?;
            let mut expirations = 0u64;
            // SAFETY: reading the 8-byte expiration count into a u64 we own.
            let n = unsafe { libc::read(raw, (&mut expirations as *mut u64).cast(), 8) };
            if n == 8 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_close_to_the_instant() {
        precise_thread_timers();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let late: Vec<Duration> = rt.block_on(async {
            let p = PreciseTimer::new();
            let mut late = Vec::new();
            for _ in 0..200 {
                let t = Instant::now() + Duration::from_micros(370);
                p.sleep_until(t).await;
                late.push(Instant::now().saturating_duration_since(t));
            }
            late
        });
        let mut sorted = late.clone();
        sorted.sort();
        let p50 = sorted[sorted.len() / 2];
        // tokio's timer alone would wake ~0.6 ms late here; a timerfd wakes within tens of µs.
        assert!(p50 < Duration::from_micros(200), "median lateness {p50:?}");
    }
}
