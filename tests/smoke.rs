use senders::*;
#[test]
fn smoke() {
    assert_eq!(sync_wait(just(2).then(|x| x + 1)).unwrap(), Some(3));
    assert_eq!(sync_wait(when_all((just(1), just(2).then(|x| x * 10)))).unwrap(), Some((1, 20)));
    assert_eq!(sync_wait(just(vec![1,2,3]).bulk(3, |i, v: &Vec<i32>| { assert_eq!(v[i], i as i32 + 1); })).unwrap(), Some(vec![1,2,3]));
}
