//! Power spectral density by Welch's method, and whether a spectrum peaks at a frequency and
//! its harmonics: how FTQ counts are read (HARE ch. 2 fed them to Octave's `pwelch`).

use rustfft::num_complex::Complex;
use rustfft::FftPlanner;

/// A one-sided power spectral density.
#[derive(Clone, Debug, PartialEq)]
pub struct Spectrum {
    /// Bin `k` is at `k * resolution` Hz, from 0 to the Nyquist frequency.
    pub density: Vec<f64>,
    /// Hz between bins: the sample rate over the segment length.
    pub resolution: f64,
    pub sample_rate: f64,
    /// Samples per segment, and how many segments were averaged.
    pub segment: usize,
    pub segments: usize,
}

impl Spectrum {
    /// The frequency of bin `k`, in Hz.
    pub fn frequency(&self, bin: usize) -> f64 {
        bin as f64 * self.resolution
    }
}

/// The segment length used for `samples` samples: the largest power of two at most an eighth
/// of them (so at least 15 half-overlapping segments are averaged), and at most 4096 (at a
/// 20 kHz sample rate, 4.9 Hz between bins: the 100 Hz tick and its harmonics are 20 bins
/// apart). `None` below 128 samples, too few for a spectrum worth reading.
pub fn segment_length(samples: usize) -> Option<usize> {
    if samples < 128 {
        return None;
    }
    let eighth = samples / 8;
    Some((1usize << (usize::BITS - 1 - eighth.leading_zeros())).min(4096))
}

/// Welch's estimate of the power spectral density of `samples` taken at `sample_rate` Hz:
/// segments of `segment` samples (a power of two is fastest), each half overlapping the one
/// before, each with its mean removed and a periodic Hann window applied; their squared FFT
/// magnitudes averaged and scaled to a one-sided density (units² per Hz), so the density
/// summed over the bins times the resolution is the signal's variance. The same definition as
/// SciPy's `welch(x, fs, window='hann', nperseg=segment, noverlap=segment // 2)`. `None` when
/// fewer samples than one segment, or a segment under 4 samples.
pub fn welch(samples: &[f64], sample_rate: f64, segment: usize) -> Option<Spectrum> {
    if segment < 4 || samples.len() < segment || sample_rate.is_nan() || sample_rate <= 0.0 {
        return None;
    }
    let window: Vec<f64> =
        (0..segment).map(|n| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / segment as f64).cos()).collect();
    let window_power: f64 = window.iter().map(|w| w * w).sum();
    let fft = FftPlanner::new().plan_fft_forward(segment);
    let bins = segment / 2 + 1;
    let mut sum = vec![0.0; bins];
    let mut buffer = vec![Complex::new(0.0, 0.0); segment];
    let step = segment / 2;
    let mut segments = 0;
    let mut start = 0;
    while start + segment <= samples.len() {
        let piece = &samples[start..start + segment];
        let mean = piece.iter().sum::<f64>() / segment as f64;
        for ((slot, &value), &weight) in buffer.iter_mut().zip(piece).zip(&window) {
            *slot = Complex::new((value - mean) * weight, 0.0);
        }
        fft.process(&mut buffer);
        for (total, value) in sum.iter_mut().zip(&buffer) {
            *total += value.norm_sqr();
        }
        segments += 1;
        start += step;
    }
    let scale = 1.0 / (sample_rate * window_power * segments as f64);
    let density = sum
        .iter()
        .enumerate()
        .map(|(bin, &total)| {
            // One-sided: every bin but DC and (for an even length) Nyquist holds its mirror's
            // power too.
            let both_sides = if bin == 0 || (segment.is_multiple_of(2) && bin == segment / 2) { 1.0 } else { 2.0 };
            total * scale * both_sides
        })
        .collect();
    Some(Spectrum { density, resolution: sample_rate / segment as f64, sample_rate, segment, segments })
}

/// How far above its background a peak must stand to count: 10 times (10 dB).
pub const PEAK_RATIO: f64 = 10.0;
/// Harmonics of the timer reported (those below the Nyquist frequency).
pub const HARMONICS: usize = 10;
/// Bins on each side of a multiple of the frequency that belong to its line, not to the
/// background: a Hann window spreads a line over about three bins, and the frequency may sit
/// between two.
const LINE_HALF_WIDTH: f64 = 2.0;
/// The background of a harmonic is taken from at least this many bins on each side of it.
const BACKGROUND_HALF_WIDTH_BINS: f64 = 10.0;

/// One harmonic of a frequency looked for in a spectrum.
#[derive(Clone, Debug, PartialEq)]
pub struct Harmonic {
    /// 1 for the fundamental.
    pub order: usize,
    pub frequency: f64,
    /// The highest density within one bin of the frequency's nearest bin.
    pub density: f64,
    /// The median density of the bins around it that belong to no multiple of the frequency.
    pub background: f64,
    /// `density` over `background`.
    pub ratio: f64,
}

/// Whether a spectrum peaks at a frequency, by [`peaks_at`].
#[derive(Clone, Debug, PartialEq)]
pub struct PeakTest {
    pub frequency: f64,
    /// The first [`HARMONICS`] multiples below the Nyquist frequency.
    pub harmonics: Vec<Harmonic>,
    /// The criterion: the fundamental stands [`PEAK_RATIO`] times above its background.
    pub peak: bool,
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len().is_multiple_of(2) { (values[middle - 1] + values[middle]) / 2.0 } else { values[middle] })
}

/// The peak criterion: does `spectrum` peak at `frequency` (a timer's rate)?
///
/// For each multiple `h * frequency` below Nyquist (the first [`HARMONICS`]), the line's
/// density is the highest within one bin of its nearest bin (a Hann window spreads a line over
/// about three bins). Its background is the median density of the bins around it, within half
/// the frequency or [`BACKGROUND_HALF_WIDTH_BINS`] bins, whichever is wider, leaving out DC and
/// every bin within two of any multiple of the frequency: local, so a spectrum that simply
/// falls with frequency (as FTQ spectra under TCG do) shows no peak anywhere, and a median, so
/// a few other lines do not raise it. The spectrum peaks at the frequency when the
/// fundamental's line is at least [`PEAK_RATIO`] times its background; the harmonics are
/// reported beside it (a periodic interruption, a train of short dips, puts a line at every
/// multiple). `None` when the frequency is not between the first bin above DC and Nyquist.
pub fn peaks_at(spectrum: &Spectrum, frequency: f64) -> Option<PeakTest> {
    let last = spectrum.density.len().checked_sub(1)?;
    let resolution = spectrum.resolution;
    let nearest = |f: f64| (f / resolution).round() as usize;
    if frequency.is_nan() || frequency <= 0.0 || nearest(frequency) < 1 || nearest(frequency) > last {
        return None;
    }
    let on_a_line = |bin: usize| {
        let f = spectrum.frequency(bin);
        let order = (f / frequency).round().max(1.0);
        ((f - order * frequency) / resolution).abs() <= LINE_HALF_WIDTH
    };
    let reach = (frequency / 2.0).max(BACKGROUND_HALF_WIDTH_BINS * resolution);
    let mut harmonics = Vec::new();
    for order in 1..=HARMONICS {
        let line = order as f64 * frequency;
        let centre = nearest(line);
        if centre > last {
            break;
        }
        let density = spectrum.density[centre.saturating_sub(1).max(1)..=(centre + 1).min(last)]
            .iter()
            .copied()
            .fold(0.0, f64::max);
        let around = (1..=last)
            .filter(|&bin| (spectrum.frequency(bin) - line).abs() <= reach && !on_a_line(bin))
            .map(|bin| spectrum.density[bin])
            .collect();
        let Some(background) = median(around) else { break };
        let ratio = if background > 0.0 { density / background } else { f64::INFINITY };
        harmonics.push(Harmonic { order, frequency: line, density, background, ratio });
    }
    let peak = harmonics.first()?.ratio >= PEAK_RATIO;
    Some(PeakTest { frequency, harmonics, peak })
}

/// How far the bin at `frequency` stands above its surroundings: its density over the median
/// of the bins within [`BACKGROUND_HALF_WIDTH_BINS`] on either side, leaving out DC and the two
/// bins next to it on each side. `None` outside the spectrum.
pub fn line_ratio(spectrum: &Spectrum, frequency: f64) -> Option<f64> {
    let last = spectrum.density.len().checked_sub(1)?;
    let centre = (frequency / spectrum.resolution).round() as usize;
    if centre == 0 || centre > last {
        return None;
    }
    let reach = BACKGROUND_HALF_WIDTH_BINS as usize;
    let around = (centre.saturating_sub(reach).max(1)..=(centre + reach).min(last))
        .filter(|&bin| bin.abs_diff(centre) as f64 > LINE_HALF_WIDTH)
        .map(|bin| spectrum.density[bin])
        .collect();
    let background = median(around)?;
    Some(spectrum.density[centre] / background)
}

/// The `count` most prominent lines: bins above DC higher than their neighbours, ranked by
/// [`line_ratio`]; (frequency, density, ratio), most prominent first.
pub fn strongest_lines(spectrum: &Spectrum, count: usize) -> Vec<(f64, f64, f64)> {
    let density = &spectrum.density;
    let mut lines: Vec<(f64, f64, f64)> = (1..density.len().saturating_sub(1))
        .filter(|&bin| density[bin] > density[bin - 1] && density[bin] >= density[bin + 1])
        .filter_map(|bin| {
            let frequency = spectrum.frequency(bin);
            Some((frequency, density[bin], line_ratio(spectrum, frequency)?))
        })
        .collect();
    lines.sort_by(|a, b| b.2.total_cmp(&a.2));
    lines.truncate(count);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*, then uniform in [-1, 1): noise of variance 1/3 without a dependency.
    fn noise(count: usize, mut state: u64) -> Vec<f64> {
        (0..count)
            .map(|_| {
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
                bits as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    fn sine(count: usize, amplitude: f64, frequency: f64, sample_rate: f64) -> Vec<f64> {
        (0..count)
            .map(|n| amplitude * (2.0 * std::f64::consts::PI * frequency * n as f64 / sample_rate).sin() + 3.0)
            .collect()
    }

    fn argmax(values: &[f64]) -> usize {
        (0..values.len()).max_by(|&a, &b| values[a].total_cmp(&values[b])).unwrap()
    }

    fn power(spectrum: &Spectrum) -> f64 {
        spectrum.density.iter().sum::<f64>() * spectrum.resolution
    }

    #[test]
    fn a_sine_peaks_at_its_bin() {
        // 1000 Hz sampling, 256-sample segments: 3.90625 Hz a bin. 125 Hz is bin 32 exactly;
        // 130 Hz lies at 33.28 bins, so its nearest bin is 33.
        for (frequency, bin) in [(125.0, 32), (130.0, 33), (400.0, 102)] {
            let spectrum = welch(&sine(8192, 2.0, frequency, 1000.0), 1000.0, 256).unwrap();
            assert_eq!(spectrum.density.len(), 129);
            assert_eq!(spectrum.segments, 63);
            assert_eq!(argmax(&spectrum.density), bin, "{frequency} Hz");
            assert!((spectrum.frequency(bin) - frequency).abs() <= spectrum.resolution / 2.0);
            // Parseval: a sine of amplitude 2 has variance 2 (the offset 3 is removed).
            assert!((power(&spectrum) - 2.0).abs() < 0.05, "{frequency} Hz: {}", power(&spectrum));
        }
    }

    #[test]
    fn white_noise_is_flat() {
        let sample_rate = 20_000.0;
        let spectrum = welch(&noise(200_000, 7), sample_rate, 1024).unwrap();
        let variance = 1.0 / 3.0;
        let level = 2.0 * variance / sample_rate;
        let inner = &spectrum.density[1..spectrum.density.len() - 1];
        let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
        assert!((mean(inner) / level - 1.0).abs() < 0.03, "level {} against {level}", mean(inner));
        let (low, high) = inner.split_at(inner.len() / 2);
        assert!((mean(low) / mean(high) - 1.0).abs() < 0.05, "low half {} high half {}", mean(low), mean(high));
        // 390 segments averaged: every bin within a factor 1.5 of the level.
        assert!(inner.iter().all(|&d| d > level / 1.5 && d < level * 1.5));
        assert!((power(&spectrum) / variance - 1.0).abs() < 0.03);
        let test = peaks_at(&spectrum, 100.0).unwrap();
        assert!(!test.peak, "no line in white noise: {test:?}");
        assert!(test.harmonics.iter().all(|h| h.ratio < 2.0));
    }

    #[test]
    fn a_tick_is_a_peak_at_its_rate_and_harmonics() {
        // FTQ counts at 20 kHz with a 100 Hz tick: every 200th quantum loses a fifth of its
        // work, on top of noise of 1 % of the count.
        let sample_rate = 20_000.0;
        let counts: Vec<f64> = noise(100_000, 3)
            .iter()
            .enumerate()
            .map(|(index, n)| 1.0 - 0.01 * n - if index % 200 == 17 { 0.2 } else { 0.0 })
            .collect();
        let spectrum = welch(&counts, sample_rate, segment_length(counts.len()).unwrap()).unwrap();
        assert_eq!(spectrum.segment, 4096);
        let test = peaks_at(&spectrum, 100.0).unwrap();
        assert!(test.peak, "{test:?}");
        assert_eq!(test.harmonics.len(), HARMONICS);
        assert!(test.harmonics.iter().all(|h| h.ratio >= PEAK_RATIO), "an impulse train has every harmonic");
        let (strongest, _, ratio) = strongest_lines(&spectrum, 1)[0];
        assert!(ratio >= PEAK_RATIO);
        assert!(line_ratio(&spectrum, strongest).unwrap() >= PEAK_RATIO);
        assert!(line_ratio(&spectrum, 150.0).unwrap() < 3.0, "between two harmonics");
        assert_eq!(line_ratio(&spectrum, 0.0), None);
        assert!(((strongest / 100.0).round() * 100.0 - strongest).abs() <= spectrum.resolution);
        assert!(peaks_at(&spectrum, 0.1).is_none(), "below the first bin");
        assert!(peaks_at(&spectrum, 20_000.0).is_none(), "above Nyquist");
    }

    #[test]
    fn a_falling_spectrum_has_no_peak() {
        // Red noise (each sample mostly the one before): its density falls by orders of
        // magnitude from low to high frequencies, with no line anywhere.
        let mut level = 0.0;
        let red: Vec<f64> = noise(100_000, 11)
            .into_iter()
            .map(|n| {
                level = 0.98 * level + n;
                level
            })
            .collect();
        let spectrum = welch(&red, 20_000.0, 4096).unwrap();
        assert!(spectrum.density[5] > 100.0 * spectrum.density[2000], "red");
        let test = peaks_at(&spectrum, 100.0).unwrap();
        assert!(!test.peak, "{test:?}");
        assert!(test.harmonics.iter().all(|h| h.ratio < 3.0), "{test:?}");
    }

    #[test]
    fn segment_lengths() {
        assert_eq!(segment_length(127), None);
        assert_eq!(segment_length(128), Some(16));
        assert_eq!(segment_length(10_000), Some(1024));
        assert_eq!(segment_length(100_000), Some(4096));
        assert_eq!(segment_length(10_000_000), Some(4096));
        assert!(welch(&[1.0; 10], 1.0, 16).is_none());
        assert!(welch(&[1.0; 10], 0.0, 8).is_none());
    }
}
