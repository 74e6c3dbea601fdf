//! A sub-millisecond timer inside the runtime: a Linux `timerfd` registered with
//! tokio's I/O driver.
//!
//! tokio's own timer rounds every sleep up to the next whole millisecond. A thread of
//! our own sleeping with the kernel's high-resolution timer is precise, but each of its
//! wake-ups costs two thread switches before any work is done: the thread wakes, then
//! it wakes a runtime worker to run what it released. A `timerfd` armed for an
//! absolute instant on `CLOCK_MONOTONIC` is as precise as the thread (the kernel's
//! hrtimer), and it wakes the runtime worker parked in the I/O driver directly: one
//! switch, and what is released runs on the worker that woke.
//!
//! Its cost: it runs at the runtime's priority, not raised, so a saturated runtime
//! delays it as it delays any task (the schedule lag shows it, never hidden).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Instant;

/// One `timerfd` in the runtime's I/O driver. Create and use it inside the runtime.
#[derive(Debug)]
pub struct FdTimer {
    fd: AsyncFd<OwnedFd>,
}

impl FdTimer {
    /// A disarmed timer on `CLOCK_MONOTONIC`.
    pub fn new() -> io::Result<FdTimer> {
        // SAFETY: timerfd_create has no preconditions; on success it returns a new file
        // descriptor that nothing else owns, which OwnedFd then closes exactly once.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid descriptor owned by no one else (just created).
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `owned` is a valid, open descriptor that stays open and the same
        // for as long as the AsyncFd holds it (OwnedFd closes it only on drop, after
        // the AsyncFd has deregistered it), and its as_raw_fd always returns it.
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(FdTimer { fd })
    }

    /// Sleep until `at` (at once if it has passed), with the kernel's timer precision.
    pub async fn sleep_until(&mut self, at: Instant) -> io::Result<()> {
        let now = Instant::now();
        if at <= now {
            return Ok(());
        }
        self.arm(at - now)?;
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| read_counter(fd.get_ref().as_raw_fd())) {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                // Spurious readiness: the expiry was read already; wait again.
                Err(_would_block) => continue,
            }
        }
    }

    /// Arm the timer to expire once, `after` from now, on the monotonic clock.
    fn arm(&self, after: std::time::Duration) -> io::Result<()> {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec it is given, which lives
        // across the call.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let nanos = now.tv_nsec as u64 + u64::from(after.subsec_nanos());
        let value = libc::timespec {
            tv_sec: now.tv_sec
                + after.as_secs() as libc::time_t
                + (nanos / 1_000_000_000) as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: the descriptor is a timerfd this timer owns; `spec` lives across the
        // call and the old value is not asked for (null).
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A task's sleep on the runtime: on a [`FdTimer`] while it has one that works, else on
/// tokio's timer (whole milliseconds, rounded up; the only one virtual time has). A
/// timerfd that fails is dropped and tokio's timer serves from then on: coarser, which
/// the schedule lag shows.
#[derive(Debug)]
pub struct RuntimeSleep {
    fd: Option<FdTimer>,
}

impl RuntimeSleep {
    /// Sleep on `fd`.
    pub fn on(fd: FdTimer) -> RuntimeSleep {
        RuntimeSleep { fd: Some(fd) }
    }

    /// Sleep on a new timerfd, or on tokio's timer if none can be made (the process is
    /// out of descriptors).
    pub fn fine() -> RuntimeSleep {
        RuntimeSleep {
            fd: FdTimer::new().ok(),
        }
    }

    /// Sleep on tokio's timer (virtual time).
    pub fn tokio() -> RuntimeSleep {
        RuntimeSleep { fd: None }
    }

    /// Sleep until `at`.
    pub async fn sleep_until(&mut self, at: Instant) {
        if let Some(fd) = &mut self.fd {
            if fd.sleep_until(at).await.is_ok() {
                return;
            }
            self.fd = None;
        }
        tokio::time::sleep_until(at).await;
    }
}

/// Read and reset the 8-byte counter of a `timerfd` (its expirations) or an `eventfd`
/// (its rings): WouldBlock while it is zero.
pub(crate) fn read_counter(fd: i32) -> io::Result<u64> {
    let mut n = 0u64;
    // SAFETY: reads at most 8 bytes into `n`, which lives across the call.
    let rc = unsafe { libc::read(fd, (&mut n as *mut u64).cast(), 8) };
    if rc == 8 {
        Ok(n)
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn it_sleeps_at_least_until_the_instant_and_not_to_the_next_millisecond() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut t = FdTimer::new().unwrap();
            let mut late = Vec::new();
            for _ in 0..50 {
                let at = Instant::now() + Duration::from_micros(300);
                t.sleep_until(at).await.unwrap();
                let now = Instant::now();
                assert!(now >= at, "woke {:?} early", at - now);
                late.push(now - at);
            }
            // A past instant returns at once.
            t.sleep_until(Instant::now() - Duration::from_millis(1))
                .await
                .unwrap();
            // tokio's timer rounds each 300 µs sleep up to a whole millisecond (at
            // least 700 µs late every time). One sleep of fifty under that rules the
            // rounding out without betting on how busy the machine is.
            let best = late.iter().min().unwrap();
            assert!(*best < Duration::from_micros(700), "best {best:?}");
        });
    }
}
