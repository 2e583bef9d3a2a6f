//! A small seeded pseudo-random generator (xoshiro256**, seeded through SplitMix64) and the
//! draws the pipeline needs: uniform, normal, Pareto and netem's "paretonormal" mix.
//!
//! Our own generator rather than a crate, because reproducibility is a product promise: the
//! decisions for a seed must not change when a dependency changes its algorithm. Each
//! impairment of each direction gets its own stream ([`Rng::stream`]), so switching duplication
//! on does not shift the loss decisions of the same packet sequence.

/// xoshiro256** (Blackman and Vigna): fast, 256-bit state, good statistical quality.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator for `seed`; equal seeds give equal sequences.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// An independent stream for (`seed`, `stream`): used to give each impairment its own.
    pub fn stream(seed: u64, stream: u64) -> Rng {
        let mut x = stream.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ seed;
        Rng::new(splitmix64(&mut x))
    }

    /// The next 64 random bits (xoshiro256**).
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (p ≤ 0 never, p ≥ 1 always).
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Uniform integer in [0, n); n must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift: bias below 2^-64 · n, irrelevant for packet sizes.
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Standard normal (mean 0, σ 1) by Box–Muller; one value per call keeps the stream simple.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]: ln is finite
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Pareto with shape 3, shifted and scaled to mean 0 and σ 1 (the shape of iproute2's
    /// `pareto.dist` table, which is also normalised to mean 0 and σ 1).
    pub fn pareto(&mut self) -> f64 {
        const A: f64 = 3.0;
        let x = (1.0 - self.uniform()).powf(-1.0 / A); // xm = 1
        let mean = A / (A - 1.0);
        let sd = (A / ((A - 1.0) * (A - 1.0) * (A - 2.0))).sqrt();
        (x - mean) / sd
    }

    /// iproute2's "paretonormal": a quarter normal and three quarters Pareto, renormalised to
    /// σ 1 (the sum of independent parts has variance 1/16 + 9/16).
    pub fn paretonormal(&mut self) -> f64 {
        let v = 0.25 * self.normal() + 0.75 * self.pareto();
        v / (0.625f64).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(mut f: impl FnMut() -> f64, n: usize) -> (f64, f64) {
        let xs: Vec<f64> = (0..n).map(|_| f()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (mean, var.sqrt())
    }

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let a: Vec<u64> = (0..8).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.iter().all(|&x| x == a[0]));
        let mut r1 = Rng::stream(7, 1);
        let mut r2 = Rng::stream(7, 2);
        let (x1, x2): (Vec<u64>, Vec<u64>) = (0..4).map(|_| (r1.next_u64(), r2.next_u64())).unzip();
        assert_ne!(x1, x2);
        let mut again = Rng::stream(7, 1);
        assert_eq!(x1, (0..4).map(|_| again.next_u64()).collect::<Vec<_>>());
    }

    #[test]
    fn draws_have_the_documented_moments() {
        let mut r = Rng::new(1);
        let (m, s) = moments(|| r.uniform(), 200_000);
        assert!((m - 0.5).abs() < 0.005 && (s - (1.0f64 / 12.0).sqrt()).abs() < 0.005);
        let (m, s) = moments(|| r.normal(), 200_000);
        assert!(m.abs() < 0.01 && (s - 1.0).abs() < 0.01, "{m} {s}");
        // Pareto(3) has a heavy tail (infinite fourth moment): looser bounds on σ.
        let (m, s) = moments(|| r.pareto(), 400_000);
        assert!(m.abs() < 0.02 && (s - 1.0).abs() < 0.1, "{m} {s}");
        let (m, s) = moments(|| r.paretonormal(), 400_000);
        assert!(m.abs() < 0.02 && (s - 1.0).abs() < 0.1, "{m} {s}");
        assert!((0..10_000).all(|_| r.below(10) < 10));
    }
}
