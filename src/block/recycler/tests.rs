//! White-box tests of the recycler: reuse, the remote stacks, the outgoing chain, the
//! local cap.

use super::*;
use std::sync::mpsc;

#[test]
fn a_block_freed_by_its_thread_is_reused() {
    let a = new([7u64; 4]);
    // SAFETY: from `new`, contents are `Copy`.
    unsafe { free(a) };
    let b = new([8u64; 4]);
    assert_eq!(a, b, "the freed block is the next one handed out");
    // SAFETY: as above.
    unsafe { free(b) };
}

/// How many of `addrs` (blocks of `T`'s class) this thread's next allocations of a
/// `T` hand out. It allocates until it has seen them all, or `slack` more blocks than
/// that: a test thread may have adopted a parked `Remote` whose stacks hold blocks
/// other tests freed after their thread exited, and those can come out first.
fn handed_out<T: Copy>(addrs: &[usize], value: T) -> usize {
    let slack = LOCAL_CAP;
    let mut held = Vec::new();
    let mut seen = 0;
    while seen < addrs.len() && held.len() < addrs.len() + slack {
        let b = new(value);
        seen += usize::from(addrs.contains(&b.as_ptr().addr()));
        held.push(b);
    }
    for b in held {
        // SAFETY: from `new`, `Copy` contents, freed once.
        unsafe { free(b) };
    }
    seen
}

#[test]
fn blocks_freed_elsewhere_return_to_their_owner() {
    let addrs: Vec<usize> = (0..100).map(|i| new([i as u64; 8]).as_ptr().addr()).collect();
    let sendable: Vec<usize> = addrs.clone();
    std::thread::spawn(move || {
        for a in sendable {
            // SAFETY: each block is freed once, its contents are `Copy`.
            unsafe { free(NonNull::new(a as *mut [u64; 8]).unwrap()) };
        }
    })
    .join()
    .unwrap();
    assert_eq!(handed_out(&addrs, [0u64; 8]), 100, "every block came back through the remote stack");
}

/// A thread freeing blocks of two owners and two classes, interleaved, sends every
/// one home: each owner reuses all of its blocks once that thread has exited.
#[test]
fn blocks_of_several_owners_and_classes_freed_interleaved_all_go_home() {
    fn allocate() -> (Vec<usize>, Vec<usize>) {
        let small = (0..40).map(|i| new([i as u64; 2]).as_ptr().addr()).collect();
        let large = (0..40).map(|i| new([i as u64; 20]).as_ptr().addr()).collect();
        (small, large)
    }
    fn reused((small, large): &(Vec<usize>, Vec<usize>)) -> usize {
        handed_out(small, [0u64; 2]) + handed_out(large, [0u64; 20])
    }
    let ours = allocate();
    let (tx, rx) = mpsc::channel();
    let (go, wait) = mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let theirs = allocate();
        tx.send(theirs.clone()).unwrap();
        wait.recv().unwrap();
        reused(&theirs)
    });
    let theirs = rx.recv().unwrap();
    let (a, b) = (ours.clone(), theirs.clone());
    std::thread::spawn(move || {
        for i in 0..40 {
            // SAFETY: each block is freed once; `Copy` contents.
            unsafe {
                free(NonNull::new(a.0[i] as *mut [u64; 2]).unwrap());
                free(NonNull::new(b.1[i] as *mut [u64; 20]).unwrap());
                free(NonNull::new(b.0[i] as *mut [u64; 2]).unwrap());
                free(NonNull::new(a.1[i] as *mut [u64; 20]).unwrap());
            }
        }
    })
    .join()
    .unwrap();
    go.send(()).unwrap();
    assert_eq!(reused(&ours), 80, "every block of ours came home");
    assert_eq!(other.join().unwrap(), 80, "every block of the other owner's came home");
}

/// A long batch taken back is cut at `LOCAL_CAP` blocks (the rest go back to the
/// allocator), so a burst's blocks do not all stay in circulation; a short one is
/// taken whole.
#[test]
fn a_long_batch_taken_back_is_cut_at_the_cap() {
    type Big = [u64; 60];
    let class = class_of(Layout::new::<Big>()).unwrap();
    let mut held = Vec::new();
    // A short batch may hold a few more blocks than were freed here: blocks other
    // tests freed to a parked `Remote` this thread adopted.
    for (n, want) in [(3 * LOCAL_CAP, LOCAL_CAP..=LOCAL_CAP), (100, 100..=LOCAL_CAP)] {
        let addrs: Vec<usize> = (0..n).map(|_| new([0u64; 60]).as_ptr().addr()).collect();
        assert_eq!(cache::local_len(class), 0, "the list was used up");
        std::thread::spawn(move || {
            for a in addrs {
                // SAFETY: each block is freed once; `Copy` contents.
                unsafe { free(NonNull::new(a as *mut Big).unwrap()) };
            }
        })
        .join()
        .unwrap();
        // This allocation takes the batch back, and hands out its first block.
        let b = new([1u64; 60]);
        let taken = cache::local_len(class) + 1;
        assert!(want.contains(&taken), "{n} blocks freed elsewhere, {taken} taken back");
        // SAFETY: from `new`, `Copy` contents, freed once.
        unsafe { free(b) };
        while cache::local_len(class) > 0 {
            held.push(new([2u64; 60]));
        }
    }
    for b in held {
        // SAFETY: from `new`, `Copy` contents, freed once.
        unsafe { free(b) };
    }
}

#[test]
fn large_and_aligned_values_use_the_global_allocator_and_keep_their_contents() {
    #[repr(align(64))]
    struct Aligned([u8; 64]);
    let a = new(Aligned([3; 64]));
    assert_eq!(a.as_ptr().addr() % 64, 0);
    // SAFETY: live, initialized.
    assert_eq!(unsafe { a.as_ref() }.0[63], 3);
    // SAFETY: from `new`, no drop glue.
    unsafe { free(a) };
    let big = new([5u8; MAX_SIZE + 1]);
    // SAFETY: as above.
    assert_eq!(unsafe { big.as_ref() }[MAX_SIZE], 5);
    // SAFETY: as above.
    unsafe { free(big) };
    let zst = new(());
    // SAFETY: as above.
    unsafe { free(zst) };
}

#[test]
fn an_exited_threads_blocks_are_adopted_with_its_remote() {
    let (tx, rx) = mpsc::channel::<usize>();
    std::thread::spawn(move || {
        tx.send(new([1u64; 2]).as_ptr().addr()).unwrap();
    })
    .join()
    .unwrap();
    // The owner exited; freeing here parks the block on its (parked) remote stack.
    let addr = rx.recv().unwrap();
    // SAFETY: freed once; `Copy` contents.
    unsafe { free(NonNull::new(addr as *mut [u64; 2]).unwrap()) };
    // Threads adopting parked remotes reuse it; allocation keeps working meanwhile.
    let handles: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let b = new([2u64; 2]);
                // SAFETY: from `new`.
                unsafe { free(b) };
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
