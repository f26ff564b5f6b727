//! The named cases of a bench's interleaved rounds (`lend`, `reduce`): ours and rayon's
//! routine side by side, timed with [`paired_rounds`](super::paired::paired_rounds) and
//! printed one line each.

use super::paired;

/// One case: ours and rayon's routine.
pub struct Case<'a> {
    pub name: &'static str,
    pub ours: Box<dyn FnMut() + 'a>,
    pub rayon: Box<dyn FnMut() + 'a>,
}

impl Case<'_> {
    /// Times `rounds` alternating rounds of `n` calls a side and prints the medians per
    /// call and the median of the rounds' ratios, ours ÷ rayon, with their range.
    pub fn print_rounds(&mut self, rounds: usize, n: u32) {
        let rounds = paired::paired_rounds(rounds, (&mut *self.ours, n), (&mut *self.rayon, n));
        let ratios: Vec<f64> = rounds.iter().map(|(o, r)| o / r).collect();
        let ours: Vec<f64> = rounds.iter().map(|r| r.0).collect();
        let theirs: Vec<f64> = rounds.iter().map(|r| r.1).collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "{:<10} ours {:>10}  rayon {:>10}  {:.3}× [{lo:.2}–{hi:.2}]",
            self.name,
            paired::format_ns(paired::median(&ours)),
            paired::format_ns(paired::median(&theirs)),
            paired::median(&ratios)
        );
    }
}
