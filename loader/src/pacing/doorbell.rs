//! The way into the runtime from a thread of our own: bounded hand-over queues whose
//! wake-ups ring a doorbell (an `eventfd` in tokio's I/O driver) instead of waking the
//! receiving task from outside the runtime.
//!
//! Why. A task woken from a thread outside the runtime goes through tokio's inject
//! queue, and the worker it unparks is marked *searching*. When that worker finds the
//! task, it was the last searcher, so it unparks the other worker too, which finds
//! nothing and parks again: a third thread switch for a hand-over, on top of the
//! pacer's own wake-up and the worker's. On the 2-vCPU VMs this project measures on,
//! a sleep and wake-up costs about 20 µs of CPU. A readable `eventfd` instead wakes the
//! worker parked in the I/O driver as a socket does. tokio does not mark a worker woken
//! by its driver as searching, and the doorbell's task wakes the receivers from inside
//! the runtime, so this hand-over wakes no other worker. On the Redis tax shape the
//! cell's worker-to-worker wake-ups fell from 388 to 104 a second, and its CPU per
//! delivery by a fifth (docs/performance.md, "The pacer's hand-over through a
//! doorbell").
//!
//! [`handoff`] makes `n` queues of `cap` items each: the sender side ([`Handoff`])
//! for the pacer's emit closure, never waiting (a full queue refuses the item, as
//! `tokio::sync::mpsc::Sender::try_send` does), and one [`Receiver`] per worker. When
//! the [`Handoff`] is dropped every queue closes: a receiver gets what is left, then
//! `None`. Without a [`Doorbell`] (a pacer that is itself a task, or virtual time) the
//! receivers are woken directly, as a channel would.
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::pacing::fd_timer::read_counter;

/// The doorbell: wakers to wake, and the `eventfd` that tells the runtime there are
/// some.
#[derive(Debug)]
struct Bell {
    /// The sender's own descriptor of the `eventfd` (a duplicate of the one the
    /// runtime polls), so a write never meets a closed or reused descriptor.
    fd: OwnedFd,
    /// Set by the sender that writes the `eventfd`, cleared by the doorbell's task
    /// before it takes the wakers: one write per round, however many wakers.
    rung: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
    /// The senders are gone: the task wakes what is left and ends.
    closed: AtomicBool,
    /// The doorbell could not be polled: wake directly from now on.
    broken: AtomicBool,
}

impl Bell {
    fn wake(&self, w: Waker) {
        if self.broken.load(Ordering::Acquire) {
            w.wake();
            return;
        }
        self.wakers.lock().push(w);
        self.ring();
        self.if_broken_wake_here();
    }

    /// Once the task has given up (never seen), whatever is queued is woken here, by
    /// the task as it gives up and by any sender after it, so no waker is lost.
    fn if_broken_wake_here(&self) {
        if self.broken.load(Ordering::Acquire) {
            for w in std::mem::take(&mut *self.wakers.lock()) {
                w.wake();
            }
        }
    }

    fn ring(&self) {
        if !self.rung.swap(true, Ordering::SeqCst) {
            write_eventfd(self.fd.as_raw_fd());
        }
    }
}

/// One bounded queue.
#[derive(Debug)]
struct Queue<T> {
    items: Mutex<VecDeque<T>>,
    cap: usize,
    waker: AtomicWaker,
    closed: AtomicBool,
}

/// The sending side of every queue: owned by the pacer's emit closure.
#[derive(Debug)]
pub struct Handoff<T> {
    queues: Vec<Arc<Queue<T>>>,
    bell: Option<Doorbell>,
}

/// The doorbell's sending side, for a thread outside the runtime: wakers handed to it
/// are woken by its task inside the runtime. Dropping it ends the task once it has
/// woken what is left.
#[derive(Debug)]
pub struct Doorbell {
    bell: Arc<Bell>,
}

impl Doorbell {
    /// A doorbell and its task (spawned here: call inside the runtime), or the error
    /// that kept the `eventfd` from being made or registered.
    pub fn start() -> io::Result<(Doorbell, tokio::task::JoinHandle<()>)> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "no runtime here: a doorbell is started inside one",
            ));
        }
        let (bell, polled) = doorbell()?;
        let task = tokio::spawn(serve(bell.clone(), polled));
        Ok((Doorbell { bell }, task))
    }

    /// Wake `w` from inside the runtime.
    fn wake(&self, w: Waker) {
        self.bell.wake(w);
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        self.bell.closed.store(true, Ordering::Release);
        self.bell.ring();
    }
}

/// One worker's end of its queue.
#[derive(Debug)]
pub struct Receiver<T> {
    queue: Arc<Queue<T>>,
}

/// `n` queues of `cap` items each (at least one), and their receivers. With a
/// doorbell the receivers are woken through it (the sender is a thread outside the
/// runtime); without, directly (the sender runs on the runtime: a task pacer,
/// virtual time).
pub fn handoff<T>(n: usize, cap: usize, bell: Option<Doorbell>) -> (Handoff<T>, Vec<Receiver<T>>) {
    let queues: Vec<Arc<Queue<T>>> = (0..n)
        .map(|_| {
            Arc::new(Queue {
                items: Mutex::new(VecDeque::new()),
                cap: cap.max(1),
                waker: AtomicWaker::new(),
                closed: AtomicBool::new(false),
            })
        })
        .collect();
    let receivers = queues
        .iter()
        .map(|q| Receiver { queue: q.clone() })
        .collect();
    (Handoff { queues, bell }, receivers)
}

impl<T> Handoff<T> {
    /// Queue `item` for receiver `i`, or give it back if that queue is full.
    pub fn try_send(&self, i: usize, item: T) -> Result<(), T> {
        let q = &self.queues[i];
        {
            let mut items = q.items.lock();
            if items.len() >= q.cap {
                return Err(item);
            }
            items.push_back(item);
        }
        if let Some(w) = q.waker.take() {
            self.wake(w);
        }
        Ok(())
    }

    fn wake(&self, w: Waker) {
        match &self.bell {
            Some(bell) => bell.wake(w),
            None => w.wake(),
        }
    }
}

impl<T> Drop for Handoff<T> {
    fn drop(&mut self) {
        for q in &self.queues {
            q.closed.store(true, Ordering::Release);
            if let Some(w) = q.waker.take() {
                self.wake(w);
            }
        }
        // Then the doorbell, dropped with the fields, closes.
    }
}

impl<T> Receiver<T> {
    /// The next item, or `None` once the senders are gone and the queue is empty.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| {
            let q = &self.queue;
            if let Some(x) = q.items.lock().pop_front() {
                return Poll::Ready(Some(x));
            }
            q.waker.register(cx.waker());
            // Checked again after registering: an item queued (or the close) between
            // the first look and the registration took no waker, so it is seen here.
            let closed = q.closed.load(Ordering::Acquire);
            if let Some(x) = q.items.lock().pop_front() {
                return Poll::Ready(Some(x));
            }
            if closed {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
    }
}

/// A new `eventfd`: the doorbell the senders write, and the duplicate the runtime
/// polls.
fn doorbell() -> io::Result<(Arc<Bell>, AsyncFd<OwnedFd>)> {
    // SAFETY: eventfd has no preconditions; on success it returns a new descriptor
    // that nothing else owns, which OwnedFd then closes exactly once.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a valid descriptor owned by no one else (just created).
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let polled = fd.try_clone()?;
    // SAFETY: `polled` is a valid, open descriptor that stays open and the same for as
    // long as the AsyncFd holds it (OwnedFd closes it only on drop, after the AsyncFd
    // has deregistered it), and its as_raw_fd always returns it.
    let polled = unsafe { AsyncFd::register_with_interest(polled, Interest::READABLE) }
        .map_err(io::Error::from)?;
    let bell = Arc::new(Bell {
        fd,
        rung: AtomicBool::new(false),
        wakers: Mutex::new(Vec::new()),
        closed: AtomicBool::new(false),
        broken: AtomicBool::new(false),
    });
    Ok((bell, polled))
}

/// The doorbell's task: each time the `eventfd` is readable, wake every waker queued
/// since the last time, from inside the runtime; end once the senders are gone.
async fn serve(bell: Arc<Bell>, polled: AsyncFd<OwnedFd>) {
    loop {
        // Everything queued before the close was seen is woken below.
        let closed = bell.closed.load(Ordering::Acquire);
        bell.rung.store(false, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *bell.wakers.lock());
        for w in wakers {
            w.wake();
        }
        if closed {
            return;
        }
        loop {
            let Ok(mut guard) = polled.readable().await else {
                // Never seen: wake directly from now on, and whatever was queued now.
                bell.broken.store(true, Ordering::Release);
                bell.if_broken_wake_here();
                return;
            };
            match guard.try_io(|fd| read_counter(fd.get_ref().as_raw_fd())) {
                Ok(_) => break,
                // Read already: wait for the next ring.
                Err(_would_block) => continue,
            }
        }
    }
}

/// Add one to an `eventfd`'s counter (it cannot overflow here: every read resets it).
fn write_eventfd(fd: i32) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one`, which lives across the call, to a descriptor
    // this process owns. A failure (never seen) leaves the counter as it was; the
    // next ring writes again.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// A thread of its own sends through the doorbell; the receivers get every item
    /// in order, then `None` once the sender is dropped; a full queue refuses.
    #[test]
    fn items_sent_from_a_thread_arrive_in_order_and_the_queues_close() {
        for through_bell in [true, false] {
            let rt = runtime();
            let (tx, rxs, task) = rt.block_on(async {
                if through_bell {
                    let (bell, task) = Doorbell::start().unwrap();
                    let (tx, rxs) = handoff::<u32>(3, 4, Some(bell));
                    (tx, rxs, Some(task))
                } else {
                    let (tx, rxs) = handoff::<u32>(3, 4, None);
                    (tx, rxs, None)
                }
            });
            let readers: Vec<_> = rxs
                .into_iter()
                .map(|mut rx| {
                    rt.spawn(async move {
                        let mut got = Vec::new();
                        while let Some(x) = rx.recv().await {
                            got.push(x);
                        }
                        got
                    })
                })
                .collect();
            let sender = std::thread::spawn(move || {
                for k in 0..300u32 {
                    let mut item = k;
                    // A full queue gives the item back; wait for the reader.
                    while let Err(back) = tx.try_send((k % 3) as usize, item) {
                        item = back;
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    if k % 50 == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            });
            sender.join().unwrap();
            let got: Vec<Vec<u32>> = rt.block_on(async {
                let mut all = Vec::new();
                for r in readers {
                    all.push(
                        tokio::time::timeout(Duration::from_secs(10), r)
                            .await
                            .expect("a receiver never saw its queue close")
                            .unwrap(),
                    );
                }
                if let Some(t) = task {
                    tokio::time::timeout(Duration::from_secs(10), t)
                        .await
                        .expect("the doorbell's task did not end")
                        .unwrap();
                }
                all
            });
            for (i, g) in got.iter().enumerate() {
                let want: Vec<u32> = (0..300).filter(|k| k % 3 == i as u32).collect();
                assert_eq!(g, &want, "through the bell {through_bell}: queue {i}");
            }
        }
    }

    /// A waker that says which thread woke it.
    struct Witness {
        woken_on: Mutex<Vec<String>>,
        signal: std::sync::mpsc::Sender<()>,
    }

    impl std::task::Wake for Witness {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            let name = std::thread::current().name().unwrap_or("?").to_string();
            self.woken_on.lock().push(name);
            let _ = self.signal.send(());
        }
    }

    /// The point of the doorbell: an item sent from a thread outside the runtime wakes
    /// its receiver from one of the runtime's workers (the doorbell's task), never from
    /// the sending thread (which would go through tokio's inject queue and its
    /// searching workers).
    #[test]
    fn a_thread_outside_the_runtime_wakes_its_receivers_from_inside_the_runtime() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bell-test-worker")
            .enable_all()
            .build()
            .unwrap();
        let (bell, _task) = rt.block_on(async { Doorbell::start().unwrap() });
        let (tx, mut rxs) = handoff::<u32>(1, 4, Some(bell));
        let (signal, woken) = std::sync::mpsc::channel();
        let witness = Arc::new(Witness {
            woken_on: Mutex::new(Vec::new()),
            signal,
        });
        let waker = Waker::from(witness.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        // The receiver waits, registered with the witness.
        let mut recv = Box::pin(rxs[0].recv());
        assert!(recv.as_mut().poll(&mut cx).is_pending());
        let sender = std::thread::Builder::new()
            .name("bell-test-sender".into())
            .spawn(move || {
                tx.try_send(0, 7).unwrap();
                tx
            })
            .unwrap();
        woken
            .recv_timeout(Duration::from_secs(10))
            .expect("the receiver was never woken");
        assert_eq!(
            recv.as_mut().poll(&mut cx),
            Poll::Ready(Some(7)),
            "woken with its item queued"
        );
        let on = witness.woken_on.lock().clone();
        assert_eq!(on.len(), 1, "{on:?}");
        assert!(
            on.iter().all(|t| t == "bell-test-worker"),
            "the wake must run on a worker of the runtime, not on the sender: {on:?}"
        );
        drop(sender.join().unwrap());
    }

    /// A queue holds `cap` items: the next is refused and given back, and taking one
    /// makes room again.
    #[test]
    fn a_full_queue_refuses_and_gives_the_item_back() {
        let rt = runtime();
        rt.block_on(async {
            let (bell, task) = Doorbell::start().unwrap();
            let (tx, mut rxs) = handoff::<u32>(1, 2, Some(bell));
            assert_eq!(tx.try_send(0, 1), Ok(()));
            assert_eq!(tx.try_send(0, 2), Ok(()));
            assert_eq!(tx.try_send(0, 3), Err(3));
            assert_eq!(rxs[0].recv().await, Some(1));
            assert_eq!(tx.try_send(0, 3), Ok(()));
            drop(tx);
            assert_eq!(rxs[0].recv().await, Some(2));
            assert_eq!(rxs[0].recv().await, Some(3));
            assert_eq!(rxs[0].recv().await, None);
            // The sender was the doorbell's last: its task ends.
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the doorbell's task did not end")
                .unwrap();
        });
    }
}
