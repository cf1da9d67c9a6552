//! The engine's own resources: CPU time of its threads (to tell when the engine, not the server,
//! is the bottleneck) and the descriptor limit its connections need.

use std::time::Duration;

/// CPU time the calling thread has used.
pub fn thread_cpu() -> Duration {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into the timespec we own.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    Duration::ZERO
}

/// Every connection holds a socket and a timer: lift the soft descriptor limit to the hard one.
pub fn raise_fd_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit read and write the rlimit struct we own.
    unsafe {
        let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// CPU use of the engine's worker threads over the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineUsage {
    pub threads: u64,
    pub cpu_s: f64,
    /// Busy fraction (CPU time ÷ wall time) of the busiest thread.
    pub busiest: f64,
}

impl EngineUsage {
    pub fn of_thread(cpu: Duration, wall: Duration) -> EngineUsage {
        let busy = if wall.is_zero() { 0.0 } else { cpu.as_secs_f64() / wall.as_secs_f64() };
        EngineUsage { threads: 1, cpu_s: cpu.as_secs_f64(), busiest: busy.min(1.0) }
    }
    pub fn merge(&mut self, other: &EngineUsage) {
        self.threads += other.threads;
        self.cpu_s += other.cpu_s;
        self.busiest = self.busiest.max(other.busiest);
    }
}
