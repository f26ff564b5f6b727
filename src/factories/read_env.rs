//! `read_env`: a sender that completes with the answer to a query of its receiver's
//! environment.

use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::domain::NoDomain;
use crate::env::EnvQuery;
use crate::receiver::Receiver;
use crate::sender::{OperationState, SenderTo, sender};

/// The sender of [`read_env`]. `T` is the answer's type, fixed when the sender is
/// connected.
#[must_use = "senders do nothing unless connected and started"]
pub struct ReadEnv<Q, T> {
    query: Q,
    _out: PhantomData<fn() -> T>,
}

/// A sender that completes inline with the answer to `query` from the environment of
/// the receiver it is connected to.
///
/// `query` is [`GetScheduler`](crate::GetScheduler), [`GetDomain`](crate::GetDomain)
/// or a user [`Query`](crate::Query) key (whose answer is an `Option`). The stop token
/// cannot be read this way: it borrows the operation, so it is not a value that can
/// travel on to a continuation.
///
/// A panic in the query (a user [`EnvQuery`] or `Env` implementation) is caught and
/// delivered with `set_panic`.
///
/// ```
/// use senders::{read_env, sync_wait, GetScheduler, RunLoopScheduler, SenderExt};
/// let on_loop = sync_wait(read_env(GetScheduler).then(|s: RunLoopScheduler| s.is_current()));
/// assert_eq!(on_loop.unwrap(), Some(true));
/// ```
///
/// # The scheduler in a recursion
///
/// A recursive function need not take a `&PoolScheduler` parameter at every level: it
/// reads the scheduler where it needs it, from the environment it runs in. A fork-join
/// recursion needs none at all (on a pool worker the pool's `when_all` forks); the
/// scheduler is for moving work, as with [`schedule`](crate::schedule) or
/// [`starts_on`](crate::starts_on). The recursion's erased type must then keep the
/// scheduler's type: [`AnySender`](crate::AnySender)`<'a, V, E, PoolScheduler>` (made
/// with `AnySender::new`; `boxed()` forgets the scheduler, and `read_env(GetScheduler)`
/// under it does not compile). The root is started on the pool, whose scheduler the
/// environment then carries down every level.
///
/// ```
/// use senders::{AnySender, GetScheduler, PoolScheduler, SenderExt, StaticThreadPool, just, read_env, schedule,
///     starts_on, sync_wait_value, when_all};
/// use std::convert::Infallible;
///
/// type Node<'a> = AnySender<'a, u64, Infallible, PoolScheduler>;
///
/// fn sum(v: &[u64]) -> Node<'_> {
///     if v.len() <= 2 {
///         // A leaf runs on the pool, scheduled there through the scheduler it reads.
///         return AnySender::new(read_env(GetScheduler).let_value(move |sch: PoolScheduler| {
///             schedule(&sch).then(move |()| v.iter().sum())
///         }));
///     }
///     let (left, right) = v.split_at(v.len() / 2);
///     AnySender::new(when_all((sum(left), sum(right))).then(|(a, b)| a + b))
/// }
///
/// let pool = StaticThreadPool::new(2).unwrap();
/// let v: Vec<u64> = (1..=100).collect();
/// assert_eq!(sync_wait_value(starts_on(pool.scheduler(), sum(&v))), 5050);
/// ```
pub fn read_env<Q, T>(query: Q) -> ReadEnv<Q, T> {
    ReadEnv { query, _out: PhantomData }
}

sender!([Q, T] ReadEnv<Q, T> { value = T, error = Infallible, stopped = false, domain = NoDomain });

impl<Q, T, R> SenderTo<R> for ReadEnv<Q, T>
where
    R: Receiver<T, Infallible>,
    Q: EnvQuery<<R as Receiver<T, Infallible>>::Env, Output = T>,
{
    type Operation = ReadEnvOp<Q, T, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        ReadEnvOp { inner: Some((self.query, receiver)), _out: PhantomData, _pin: PhantomPinned }
    }
}

/// The operation state of [`read_env`].
pub struct ReadEnvOp<Q, T, R> {
    inner: Option<(Q, R)>,
    _out: PhantomData<fn() -> T>,
    _pin: PhantomPinned,
}

impl<Q, T, R> OperationState for ReadEnvOp<Q, T, R>
where
    R: Receiver<T, Infallible>,
    Q: EnvQuery<<R as Receiver<T, Infallible>>::Env, Output = T>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `inner` is not structurally pinned: it is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some((query, rcvr)) = this.inner.take() {
            let env = rcvr.env();
            // DROP ORDER: the closure takes the query, which dies in it, before the
            // completion.
            match crate::panic::catch(move || query.ask(env)) {
                Ok(answer) => rcvr.set_value(answer),
                Err(panic) => rcvr.set_panic(panic),
            }
        }
    }
}
