//! The model's shape, its tensors and their seeded values, and a CPU reference of one
//! step with the GPU kernels' rounding: the host-side logic CI checks without a GPU.

use cudadrv::args::Bf16;
use decode_kernels::{HEAD_DIM, MAX_SPLITS, RMS_EPS, SPLIT, gen_value};

/// A Llama-shaped decoder: width `d` (`heads x 128`), `layers`, feed-forward width `ffn`,
/// vocabulary `vocab`, and a cache of `cache` positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub d: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub cache: usize,
}

impl Shape {
    /// The default: width 2048, 16 layers of 16 heads, FFN 5632, 32000 tokens,
    /// 1024 positions (1.78 GB of weights, 0.13 GB of cache).
    pub const DEFAULT: Shape = Shape {
        d: 2048,
        layers: 16,
        heads: 16,
        ffn: 5632,
        vocab: 32000,
        cache: 1024,
    };
    /// Width 4096 (Llama-2-7B's layer: 32 heads, FFN 11008), 32 layers.
    pub const WIDE: Shape = Shape {
        d: 4096,
        layers: 32,
        heads: 32,
        ffn: 11008,
        vocab: 32000,
        cache: 1024,
    };
    /// Small enough for the CPU reference over 64 steps in about a second.
    pub const SMALL: Shape = Shape {
        d: 512,
        layers: 4,
        heads: 4,
        ffn: 1408,
        vocab: 4096,
        cache: 256,
    };
    /// The unit tests' shape.
    pub const TINY: Shape = Shape {
        d: 256,
        layers: 2,
        heads: 2,
        ffn: 512,
        vocab: 1000,
        cache: 128,
    };

    /// `default`, `wide`, `small`, `tiny`, or `d,layers,heads,ffn,vocab,cache`.
    pub fn parse(s: &str) -> Result<Shape, String> {
        let shape = match s {
            "default" => Shape::DEFAULT,
            "wide" => Shape::WIDE,
            "small" => Shape::SMALL,
            "tiny" => Shape::TINY,
            _ => {
                let v: Vec<usize> = s
                    .split(',')
                    .map(|p| p.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--shape {s}: {e}"))?;
                let [d, layers, heads, ffn, vocab, cache] = v[..] else {
                    return Err(format!(
                        "--shape {s}: want default, wide, small, tiny or d,layers,heads,ffn,vocab,cache"
                    ));
                };
                Shape {
                    d,
                    layers,
                    heads,
                    ffn,
                    vocab,
                    cache,
                }
            }
        };
        shape.check()?;
        Ok(shape)
    }

    /// What the kernels need of a shape.
    pub fn check(&self) -> Result<(), String> {
        let max_k = 8 * decode_kernels::BLOCK as usize;
        let fail = |why: String| Err(format!("shape {self:?}: {why}"));
        if self.d != self.heads * HEAD_DIM {
            return fail(format!("d must be heads x {HEAD_DIM}"));
        }
        if self.d > 4 * max_k
            || self.ffn > decode_kernels::MAX_PIECES * max_k
            || self.ffn > 8 * decode_kernels::MAX_STAGED
        {
            return fail(format!(
                "d at most {} and ffn at most {}",
                4 * max_k,
                decode_kernels::MAX_PIECES * max_k
            ));
        }
        if !self.ffn.is_multiple_of(8)
            || self.layers == 0
            || self.vocab == 0
            || self.vocab > u32::MAX as usize
        {
            return fail("ffn a multiple of 8; at least one layer and one token".into());
        }
        if !self.cache.is_multiple_of(SPLIT) || self.cache == 0 || self.cache > SPLIT * MAX_SPLITS {
            return fail(format!(
                "the cache a multiple of {SPLIT} positions, at most {}",
                SPLIT * MAX_SPLITS
            ));
        }
        Ok(())
    }

    /// Weight bytes one step reads (the projections and the LM head; the embedding's one
    /// row and the norms' gains are left out).
    pub fn weight_bytes(&self) -> u64 {
        let (d, f) = (self.d as u64, self.ffn as u64);
        let layer = 3 * d * d + d * d + 3 * d * f;
        2 * (self.layers as u64 * layer + self.vocab as u64 * d)
    }

    /// Cache bytes the step at position `pos` reads (k and v of positions `0..=pos`).
    pub fn cache_bytes(&self, pos: usize) -> u64 {
        2 * 2 * self.layers as u64 * (pos as u64 + 1) * self.d as u64
    }

    /// The first position decoded: the last `steps` positions of the cache, so the last
    /// step reads all of it (a cache prefix of `start` positions comes from the
    /// generator).
    pub fn start(&self, steps: usize) -> usize {
        self.cache.saturating_sub(steps)
    }
}

/// One tensor kind: its name in the weights file, elements per layer (or in all for a
/// global one), and its generator's scale and offset.
#[derive(Clone, Copy, Debug)]
pub struct Tensor {
    pub name: &'static str,
    pub id: u64,
    pub per_layer: bool,
    pub rows: usize,
    pub cols: usize,
    pub scale: f32,
    pub offset: f32,
}

impl Tensor {
    /// Elements of one layer's tensor (or of the global tensor).
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// The generator stream of layer `layer` (0 for global tensors).
    pub fn seed(&self, seed: u64, layer: usize) -> u64 {
        seed ^ (self.id << 48) ^ ((layer as u64) << 32)
    }

    /// Value `i` of layer `layer`.
    pub fn value(&self, seed: u64, layer: usize, i: usize) -> Bf16 {
        gen_value(self.seed(seed, layer), i as u64, self.scale, self.offset)
    }
}

/// Every tensor of the model, in the weights file's order.
pub fn tensors(s: &Shape) -> [Tensor; 12] {
    let proj = |k: usize| (3.0 / k as f32).sqrt();
    let t = |name, id, per_layer, rows, cols, scale, offset| Tensor {
        name,
        id,
        per_layer,
        rows,
        cols,
        scale,
        offset,
    };
    [
        t("embedding", 1, false, s.vocab, s.d, 1.0, 0.0),
        t("final_norm", 2, false, 1, s.d, 0.1, 1.0),
        t("lm_head", 3, false, s.vocab, s.d, proj(s.d), 0.0),
        t("attn_norm", 4, true, 1, s.d, 0.1, 1.0),
        t("w_qkv", 5, true, 3 * s.d, s.d, proj(s.d), 0.0),
        t("w_o", 6, true, s.d, s.d, proj(s.d), 0.0),
        t("ffn_norm", 7, true, 1, s.d, 0.1, 1.0),
        t("w_gate", 8, true, s.ffn, s.d, proj(s.d), 0.0),
        t("w_up", 9, true, s.ffn, s.d, proj(s.d), 0.0),
        t("w_down", 10, true, s.d, s.ffn, proj(s.ffn), 0.0),
        t("k_cache", 11, true, s.cache, s.d, 1.0, 0.0),
        t("v_cache", 12, true, s.cache, s.d, 1.0, 0.0),
    ]
}

/// The rotary tables, `cos` then `sin`, `[position][64]` each (`theta = 10000`).
pub fn rope(s: &Shape) -> Vec<f32> {
    let half = HEAD_DIM / 2;
    let mut out = vec![0.0f32; 2 * s.cache * half];
    for p in 0..s.cache {
        for j in 0..half {
            let inv = 10000f64.powf(-(2.0 * j as f64) / HEAD_DIM as f64);
            let a = p as f64 * inv;
            out[p * half + j] = a.cos() as f32;
            out[s.cache * half + p * half + j] = a.sin() as f32;
        }
    }
    out
}

/// The first token of the decoded run (any token; this one from the seed).
pub fn first_token(s: &Shape, seed: u64) -> u32 {
    (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33) as u32 % s.vocab as u32
}

fn bf(v: f32) -> f32 {
    Bf16::from_f32(v).to_f32()
}

/// The model on the CPU, `f32` copies of the bfloat16 values, and its cache.
pub struct CpuModel {
    pub shape: Shape,
    /// Per tensor, all layers: `[layer][rows][cols]`.
    pub w: Vec<Vec<f32>>,
    pub rope: Vec<f32>,
}

impl CpuModel {
    /// Generates every tensor (small shapes only: it holds them as `f32`).
    pub fn new(shape: Shape, seed: u64) -> CpuModel {
        let w = tensors(&shape)
            .iter()
            .map(|t| {
                let layers = if t.per_layer { shape.layers } else { 1 };
                (0..layers)
                    .flat_map(|l| (0..t.len()).map(move |i| t.value(seed, l, i).to_f32()))
                    .collect()
            })
            .collect();
        CpuModel {
            shape,
            w,
            rope: rope(&shape),
        }
    }

    fn layer(&self, tensor: usize, l: usize) -> &[f32] {
        let n = tensors(&self.shape)[tensor].len();
        &self.w[tensor][l * n..(l + 1) * n]
    }

    /// `bf16(x * rsqrt(mean(x^2) + eps) * gamma)`.
    fn rms_norm(x: &[f32], gamma: &[f32]) -> Vec<f32> {
        let ss: f32 = x.iter().map(|v| v * v).sum();
        let inv = 1.0 / (ss / x.len() as f32 + RMS_EPS).sqrt();
        x.iter().zip(gamma).map(|(v, g)| bf(v * inv * g)).collect()
    }

    /// `W x` in `f32` (`W` has `x.len()` columns).
    fn gemv(w: &[f32], x: &[f32]) -> Vec<f32> {
        w.chunks_exact(x.len())
            .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    }

    fn rotate(&self, v: &[f32], pos: usize) -> Vec<f32> {
        let half = HEAD_DIM / 2;
        let table = self.rope.len() / 2;
        (0..HEAD_DIM)
            .map(|i| {
                let j = i % half;
                let (c, s) = (self.rope[pos * half + j], self.rope[table + pos * half + j]);
                if i < half {
                    bf(v[i] * c - v[i + half] * s)
                } else {
                    bf(v[i] * c + v[i - half] * s)
                }
            })
            .collect()
    }

    /// One step: the logits for `token` at `pos`, with k and v appended to `cache` (`[k
    /// or v][layer][position][d]`, from [`CpuModel::initial_cache`]).
    pub fn step(&self, cache: &mut [Vec<f32>; 2], token: u32, pos: usize) -> Vec<f32> {
        let s = self.shape;
        let d = s.d;
        let emb = &self.w[0][token as usize * d..(token as usize + 1) * d];
        let mut x: Vec<f32> = emb.to_vec();
        for l in 0..s.layers {
            let xn = Self::rms_norm(&x, self.layer(3, l));
            let qkv: Vec<f32> = Self::gemv(self.layer(4, l), &xn)
                .into_iter()
                .map(bf)
                .collect();
            let mut attn = vec![0.0f32; d];
            let at = |p: usize| (l * s.cache + p) * d;
            for h in 0..s.heads {
                let hd = h * HEAD_DIM..(h + 1) * HEAD_DIM;
                let q = self.rotate(&qkv[hd.clone()], pos);
                let k = self.rotate(&qkv[d + h * HEAD_DIM..d + (h + 1) * HEAD_DIM], pos);
                cache[0][at(pos) + h * HEAD_DIM..][..HEAD_DIM].copy_from_slice(&k);
                cache[1][at(pos) + h * HEAD_DIM..][..HEAD_DIM]
                    .copy_from_slice(&qkv[2 * d + h * HEAD_DIM..2 * d + (h + 1) * HEAD_DIM]);
                let scale = 1.0 / (HEAD_DIM as f32).sqrt();
                let scores: Vec<f32> = (0..=pos)
                    .map(|p| {
                        let kp = &cache[0][at(p) + h * HEAD_DIM..][..HEAD_DIM];
                        q.iter().zip(kp).map(|(a, b)| a * b).sum::<f32>() * scale
                    })
                    .collect();
                let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = scores.iter().map(|v| (v - m).exp()).collect();
                let total: f32 = e.iter().sum();
                for i in 0..HEAD_DIM {
                    let mut acc = 0.0f32;
                    for (p, ep) in e.iter().enumerate() {
                        acc += ep * cache[1][at(p) + h * HEAD_DIM + i];
                    }
                    attn[h * HEAD_DIM + i] = bf(acc / total);
                }
            }
            let o = Self::gemv(self.layer(5, l), &attn);
            for (xi, oi) in x.iter_mut().zip(o) {
                *xi = bf(*xi + bf(oi));
            }
            let xn = Self::rms_norm(&x, self.layer(6, l));
            let g = Self::gemv(self.layer(7, l), &xn);
            let u = Self::gemv(self.layer(8, l), &xn);
            let hid: Vec<f32> = g
                .iter()
                .zip(&u)
                .map(|(&g, &u)| {
                    let (g, u) = (bf(g), bf(u));
                    bf(bf(g / (1.0 + (-g).exp())) * u)
                })
                .collect();
            let dn = Self::gemv(self.layer(9, l), &hid);
            for (xi, di) in x.iter_mut().zip(dn) {
                *xi = bf(*xi + bf(di));
            }
        }
        let xn = Self::rms_norm(&x, &self.w[1]);
        Self::gemv(&self.w[2], &xn)
    }

    /// The generated cache (k, v), `[layer][position][d]` each.
    pub fn initial_cache(&self) -> [Vec<f32>; 2] {
        [self.w[10].clone(), self.w[11].clone()]
    }
}

/// The greedy choice: the first index of the largest value (NaNs never win).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = (f32::NEG_INFINITY, u32::MAX);
    for (i, &x) in v.iter().enumerate() {
        if x > best.0 {
            best = (x, i as u32);
        }
    }
    best.1
}

/// The CPU reference's logits for the steps that decoded `tokens` from `first` at
/// `start`, each step fed the token decoded before it (teacher forcing: a near tie
/// decided the other way by one side does not send the two runs apart).
pub fn cpu_forced(m: &CpuModel, first: u32, start: usize, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut cache = m.initial_cache();
    let mut input = first;
    let mut logits = Vec::with_capacity(tokens.len());
    for (i, &t) in tokens.iter().enumerate() {
        logits.push(m.step(&mut cache, input, start + i));
        input = t;
    }
    logits
}

/// How one step's logits compare with a reference's: the largest difference and the
/// root mean square one, both over the reference's largest magnitude; the reference's
/// margin between its best and second-best logit (same scale); and whether `token` is the
/// reference's arg-max.
#[derive(Clone, Copy, Debug)]
pub struct StepDiff {
    pub max: f32,
    pub rms: f32,
    pub margin: f32,
    pub same_token: bool,
}

impl StepDiff {
    pub fn new(got: &[f32], reference: &[f32], token: u32) -> StepDiff {
        let scale = reference
            .iter()
            .fold(0.0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        let max = got
            .iter()
            .zip(reference)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        let sq: f32 = got
            .iter()
            .zip(reference)
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
        let rms = (sq / reference.len().max(1) as f32).sqrt();
        let best = argmax(reference);
        let second = reference
            .iter()
            .enumerate()
            .filter(|&(i, _)| i as u32 != best)
            .fold(f32::NEG_INFINITY, |m, (_, &v)| m.max(v));
        StepDiff {
            max: max / scale,
            rms: rms / scale,
            margin: (reference[best as usize] - second) / scale,
            same_token: best == token,
        }
    }

    /// The bfloat16 tolerance: one bfloat16 rounding that differs (half a unit in the
    /// last place, 2^-9 of a value) in one activation moves this random model's logits by
    /// up to about 1% of the largest (measured on the CPU by summing in another order), a
    /// few of them by a few percent: at most 5% of the largest logit, 1% in the root
    /// mean square.
    pub fn within_tolerance(&self) -> bool {
        self.max <= 0.05 && self.rms <= 0.01
    }

    /// A token that differs is a near tie when the reference's margin is within twice
    /// the largest difference.
    pub fn token_ok(&self) -> bool {
        self.same_token || self.margin <= 2.0 * self.max
    }
}

/// The CPU reference's tokens and logits for `steps` greedy steps from `first` at
/// `start`.
pub fn cpu_decode(
    m: &CpuModel,
    first: u32,
    start: usize,
    steps: usize,
) -> (Vec<u32>, Vec<Vec<f32>>) {
    let mut cache = m.initial_cache();
    let mut token = first;
    let mut tokens = Vec::with_capacity(steps);
    let mut logits = Vec::with_capacity(steps);
    for i in 0..steps {
        let l = m.step(&mut cache, token, start + i);
        token = argmax(&l);
        tokens.push(token);
        logits.push(l);
    }
    (tokens, logits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_check() {
        assert_eq!(Shape::parse("default"), Ok(Shape::DEFAULT));
        assert_eq!(Shape::parse("wide"), Ok(Shape::WIDE));
        assert_eq!(
            Shape::parse("256,2,2,512,1000,128"),
            Ok(Shape::TINY),
            "the numeric form"
        );
        for bad in [
            "300,2,2,512,1000,128",
            "256,2,2,512,1000,100",
            "256,2,2,512,1000,4096",
            "256,2,2,513,1000,128",
            "x",
        ] {
            assert!(Shape::parse(bad).is_err(), "{bad} must be refused");
        }
        // The figures: 1.78 GB of weights, 0.13 GB of cache for the full cache.
        let s = Shape::DEFAULT;
        assert_eq!(s.weight_bytes(), 1_775_239_168);
        assert_eq!(s.cache_bytes(s.cache - 1), 134_217_728);
        assert_eq!(s.start(64), 960);
    }

    #[test]
    fn generator_is_deterministic_and_in_range() {
        let t = tensors(&Shape::TINY)[4];
        let a: Vec<u16> = (0..1000).map(|i| t.value(7, 1, i).to_bits()).collect();
        let b: Vec<u16> = (0..1000).map(|i| t.value(7, 1, i).to_bits()).collect();
        assert_eq!(a, b);
        let other: Vec<u16> = (0..1000).map(|i| t.value(7, 0, i).to_bits()).collect();
        assert_ne!(a, other, "layers get their own streams");
        let vals: Vec<f32> = (0..100_000).map(|i| t.value(7, 1, i).to_f32()).collect();
        let bound = t.scale * 1.004; // bfloat16 rounding of the edge
        assert!(vals.iter().all(|v| v.abs() <= bound));
        let mean = vals.iter().sum::<f32>() / vals.len() as f32;
        let var = vals.iter().map(|v| v * v).sum::<f32>() / vals.len() as f32;
        assert!(mean.abs() < 0.01 * t.scale, "mean {mean}");
        // Uniform on [-a, a): variance a^2 / 3.
        assert!(
            (var / (t.scale * t.scale / 3.0) - 1.0).abs() < 0.02,
            "variance {var}"
        );
    }

    #[test]
    fn argmax_takes_the_first_largest() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.25]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -1e30]), 1);
    }

    /// The GPU's arg-max (the largest [`decode_kernels::argmax_key`] over the logits, as
    /// `rms_logits` reduces them with atomic maxima) picks what [`argmax`] picks.
    #[test]
    fn argmax_keys_pick_the_first_largest() {
        use decode_kernels::{argmax_index, argmax_key};
        let by_keys = |v: &[f32]| {
            let k = v
                .iter()
                .enumerate()
                .map(|(i, &x)| argmax_key(x, i as u32))
                .max()
                .unwrap_or(0);
            argmax_index(k)
        };
        let inf = f32::INFINITY;
        let cases: [&[f32]; 10] = [
            &[1.0, 3.0, 3.0, -1.0],
            &[f32::NAN, 0.5, 0.25],
            &[f32::NEG_INFINITY, -1e30],
            &[-0.0, 0.0, -1.0],
            &[0.0, -0.0],
            &[-3.0, -2.0, -2.0, -5.0],
            &[f32::NEG_INFINITY, f32::NAN],
            &[1e-45, -1e-45, 0.0],
            &[inf, 1.0, inf],
            &[],
        ];
        for v in cases {
            assert_eq!(by_keys(v), argmax(v), "{v:?}");
        }
        // Seeded random logits, with ties from a coarse grid.
        let mut z = 0x1234_5678_9abc_def0u64;
        for _ in 0..200 {
            let v: Vec<f32> = (0..257)
                .map(|_| {
                    z = z
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((z >> 40) % 64) as f32 / 8.0 - 4.0
                })
                .collect();
            assert_eq!(by_keys(&v), argmax(&v));
        }
    }

    /// A ring slot fewer takes one chunk a warp (2 KiB: 32 lanes x 4 pieces of 16 bytes)
    /// off a projection CTA's shared memory, and at width 4096 that is what lets three
    /// normalizing CTAs share an SM's 228 KiB (each CTA also keeps 1 KiB); at width 2048
    /// three fit with the full ring.
    #[test]
    fn a_slot_fewer_fits_three_wide_ctas() {
        use decode_kernels::{STAGES, WARPS, projection_smem};
        let sm = 228 * 1024;
        let three = |bytes: usize| 3 * (bytes + 1024) <= sm;
        for (k8, rw) in [(256, 1), (256, 2), (512, 1), (512, 2), (1376, 1)] {
            let full = projection_smem(k8, rw, STAGES);
            assert_eq!(full - projection_smem(k8, rw, STAGES - 1), WARPS * 2048);
        }
        for rw in [1, 2] {
            assert!(three(projection_smem(256, rw, STAGES)));
            assert!(!three(projection_smem(512, rw, STAGES)));
            assert!(three(projection_smem(512, rw, STAGES - 1)));
        }
    }

    /// The split of a range among a grid's warps (`o_proj`'s L2 requests): in order,
    /// disjoint, covering it, parts within one item of each other.
    #[test]
    fn parts_cover_the_range() {
        use decode_kernels::part_of;
        for total in [0usize, 1, 7, 131_072, 1 << 20, 4_000_037] {
            for n in [1usize, 3, 2112, 4224, 5000] {
                let mut next = 0;
                let (mut small, mut big) = (usize::MAX, 0);
                for i in 0..n {
                    let r = part_of(total, i, n);
                    assert_eq!(r.start, next, "total {total}, {n} parts, part {i}");
                    next = r.end;
                    small = small.min(r.len());
                    big = big.max(r.len());
                }
                assert_eq!(next, total, "total {total}, {n} parts");
                assert!(big - small <= 1, "total {total}, {n} parts: {small}..{big}");
                assert!(part_of(total, n, n).is_empty());
            }
        }
    }

    #[test]
    fn rope_rotates_by_the_position() {
        let s = Shape::TINY;
        let r = rope(&s);
        let half = HEAD_DIM / 2;
        // Position 0: no rotation; element 0's pair turns by `pos` radians.
        assert!((0..half).all(|j| r[j] == 1.0 && r[s.cache * half + j] == 0.0));
        let p = 5;
        assert!((r[p * half] - (5f32).cos()).abs() < 1e-6);
        assert!((r[s.cache * half + p * half] - (5f32).sin()).abs() < 1e-6);
    }

    /// The cache indexing: a step appends k and v at its position (and nowhere else),
    /// and the attention at a position sees the entries a previous step appended.
    #[test]
    fn steps_append_to_the_cache_at_their_position() {
        let m = CpuModel::new(Shape::TINY, 3);
        let mut cache = m.initial_cache();
        let before = cache.clone();
        let pos = 40;
        let _ = m.step(&mut cache, 5, pos);
        let d = m.shape.d;
        for (kv, (after, before)) in cache.iter().zip(&before).enumerate() {
            for l in 0..m.shape.layers {
                for p in 0..m.shape.cache {
                    let at = (l * m.shape.cache + p) * d;
                    let same = after[at..at + d] == before[at..at + d];
                    assert_eq!(same, p != pos, "cache {kv}, layer {l}, position {p}");
                }
            }
        }
        // Decoding on from `pos + 1` reads the appended entries: changing them changes
        // the next step's logits.
        let mut edited = cache.clone();
        let next = m.step(&mut cache, 6, pos + 1);
        let at = pos * d; // layer 0
        for v in &mut edited[1][at..at + d] {
            *v = -*v;
        }
        let changed = m.step(&mut edited, 6, pos + 1);
        assert_ne!(next, changed);
    }

    /// Greedy decoding on the tiny shape: deterministic, tokens in range, and not one
    /// token repeated (the model is not degenerate).
    #[test]
    fn tiny_decode_is_deterministic() {
        let s = Shape::TINY;
        let m = CpuModel::new(s, 11);
        let first = first_token(&s, 11);
        let (a, la) = cpu_decode(&m, first, s.start(8), 8);
        let (b, _) = cpu_decode(&m, first, s.start(8), 8);
        assert_eq!(a, b);
        assert!(a.iter().all(|&t| (t as usize) < s.vocab));
        assert!(a.iter().any(|&t| t != a[0]), "tokens {a:?}");
        for (t, l) in a.iter().zip(&la) {
            assert_eq!(*t, argmax(l));
            assert!(l.iter().all(|v| v.is_finite()));
        }
    }
}
