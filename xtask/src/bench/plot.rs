//! PNG charts of benchmark results, drawn with `plotters` into a bitmap.
//!
//! Four kinds: [`line_chart`] (series over a numeric x, either axis optionally logarithmic, with
//! p5..p95 error bars), [`trace_chart`] (long series as plain lines, with marked x values),
//! [`bar_chart`] (one labelled bar per benchmark with a p5..p95 whisker) and
//! [`grouped_bar_chart`] (several series side by side in each group, e.g. Reef against Linux).
//!
//! Text is drawn with a TrueType font read from the system at run time (DejaVu Sans, Liberation
//! Sans, ...) through `plotters`' `ab_glyph` feature, so neither fontconfig nor freetype is needed.
//! `REEF_PLOT_FONT` names a font file to use instead. With no font found, root installs
//! `fonts-dejavu-core` with apt-get; anyone else is told to.
//!
//! A log axis cannot show zero or negative values: such points and bars are left out with a note on
//! stderr (whisker ends below the axis are cut at its bottom), and a chart with nothing left fails.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};
use plotters_backend::{BackendCoord, DrawingErrorKind};

/// Font files tried in order: Debian's `fonts-dejavu-core`, `fonts-liberation2`,
/// `fonts-liberation`, `fonts-freefont-ttf` and `fonts-noto-core`.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];
/// The Debian package that provides the first of [`FONT_PATHS`].
const FONT_PACKAGE: &str = "fonts-dejavu-core";
/// Environment variable naming a font file to use instead of searching [`FONT_PATHS`].
const FONT_VARIABLE: &str = "REEF_PLOT_FONT";
/// The family all text is drawn in; the font found is registered under this name.
const FONT: &str = "sans-serif";

/// Pixel size of a line chart.
const LINE_SIZE: (u32, u32) = (1024, 640);
/// Pixel height of a bar chart; its width grows with the number of groups.
const BAR_HEIGHT: u32 = 600;
/// Share of a group's width that its bars fill; the rest separates groups.
const BAR_FILL: f64 = 0.72;

/// Series colours: the Okabe-Ito palette, told apart also with colour-vision deficiencies.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(80, 80, 80),
];

/// One line of a [`line_chart`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Shown in the legend.
    pub name: String,
    /// (x, y), joined in this order.
    pub points: Vec<(f64, f64)>,
    /// Per point its (p5, p95), drawn as an error bar; as long as `points` when present.
    pub low_high: Option<Vec<(f64, f64)>>,
}

/// Draws `series` as lines with markers, error bars where given and a legend into the PNG `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
    log_y: bool,
) -> Result<(), String> {
    prepare_file(path)?;
    if series.is_empty() {
        return Err(format!("line chart `{title}`: no series to draw"));
    }
    let lines = series.iter().map(|one| prepare_line(title, one, log_x, log_y)).collect::<Result<Vec<_>, _>>()?;
    let (mut xs, mut ys) = (Extent::EMPTY, Extent::EMPTY);
    for line in &lines {
        for &(x, y) in &line.points {
            xs.add(x);
            ys.add(y);
        }
        for &(_, low, _, high) in &line.whiskers {
            for end in [low, high] {
                if !log_y || end > 0.0 {
                    ys.add(end);
                }
            }
        }
    }
    if xs.is_empty() {
        return Err(format!("line chart `{title}`: no points to draw"));
    }
    ensure_font()?;
    let x_range = if log_x { log_range(xs) } else { linear_range(xs, false, 0.0) };
    let y_range = if log_y { log_range(ys) } else { linear_range(ys, true, 0.0) };
    let texts = Texts { title, x: x_label, y: y_label };
    let floor = y_range.start;
    match (log_x, log_y) {
        (false, false) => render_lines(path, &texts, &lines, x_range, y_range, floor),
        (false, true) => render_lines(path, &texts, &lines, x_range, log_axis(y_range), floor),
        (true, false) => render_lines(path, &texts, &lines, log_axis(x_range), y_range, floor),
        (true, true) => render_lines(path, &texts, &lines, log_axis(x_range), log_axis(y_range), floor),
    }
}

/// A vertical line across a [`trace_chart`] at `x`, labelled at its top.
pub type Mark = (f64, String);

/// How a [`trace_chart`] draws its points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// Joined by a thin line (a spectrum).
    Lines,
    /// Each point one pixel, unjoined (a series that jumps up and down at every point, whose
    /// lines would fill the area between its extremes).
    Dots,
}

/// Draws `series` as plain lines or dots, without markers or error bars (for series of
/// thousands of points: an FTQ trace, a spectrum), with a thin dashed vertical line at each of
/// `marks` inside the x range, into the PNG `path`. A legend is drawn when there are several
/// series.
pub fn trace_chart(
    path: &Path,
    title: &str,
    axes: (&str, &str),
    series: &[Series],
    (log_x, log_y, draw): (bool, bool, Draw),
    marks: &[Mark],
) -> Result<(), String> {
    prepare_file(path)?;
    if series.is_empty() {
        return Err(format!("trace chart `{title}`: no series to draw"));
    }
    let lines = series.iter().map(|one| prepare_line(title, one, log_x, log_y)).collect::<Result<Vec<_>, _>>()?;
    let (mut xs, mut ys) = (Extent::EMPTY, Extent::EMPTY);
    for &(x, y) in lines.iter().flat_map(|line| &line.points) {
        xs.add(x);
        ys.add(y);
    }
    if xs.is_empty() {
        return Err(format!("trace chart `{title}`: no points to draw"));
    }
    ensure_font()?;
    let x_range = if log_x { log_range(xs) } else { linear_range(xs, false, 0.0) };
    let y_range = if log_y { log_range(ys) } else { linear_range(ys, false, 0.0) };
    let trace =
        Trace { texts: Texts { title, x: axes.0, y: axes.1 }, lines: &lines, marks, y_ends: y_range.clone(), draw };
    let x_ends = x_range.clone();
    match (log_x, log_y) {
        (false, false) => render_trace(path, &trace, x_range, y_range, x_ends),
        (false, true) => render_trace(path, &trace, x_range, log_axis(y_range), x_ends),
        (true, false) => render_trace(path, &trace, log_axis(x_range), y_range, x_ends),
        (true, true) => render_trace(path, &trace, log_axis(x_range), log_axis(y_range), x_ends),
    }
}

/// A trace chart ready to draw.
struct Trace<'a> {
    texts: Texts<'a>,
    lines: &'a [Line<'a>],
    marks: &'a [Mark],
    /// Bottom and top of the y axis, where mark lines start and end.
    y_ends: Range<f64>,
    draw: Draw,
}

/// A line or trace chart on its page, ready for series.
type ChartFrame<'a, 'b, X, Y> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// The frame every line and trace chart shares: a white page, the title, the axes
/// `x_spec` and `y_spec` with their names, ticks and a faint mesh.
fn chart_frame<'a, 'b, X, Y>(
    root: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    texts: &Texts,
    x_spec: X,
    y_spec: Y,
) -> Result<ChartFrame<'a, 'b, X, Y>, DrawingAreaErrorKind<<BitMapBackend<'b> as DrawingBackend>::ErrorType>>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(texts.title, (FONT, 26))
        .margin(18)
        .x_label_area_size(64)
        .y_label_area_size(90)
        .build_cartesian_2d(x_spec, y_spec)?;
    chart
        .configure_mesh()
        .x_desc(texts.x)
        .y_desc(texts.y)
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    Ok(chart)
}

/// Draws a trace chart on the axes `x_spec` and `y_spec`; `x_ends` says which marks fit.
fn render_trace<X, Y>(path: &Path, trace: &Trace, x_spec: X, y_spec: Y, x_ends: Range<f64>) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let fail = failed(path);
    let root = BitMapBackend::new(path, LINE_SIZE).into_drawing_area();
    let mut chart = chart_frame(&root, &trace.texts, x_spec, y_spec).map_err(&fail)?;

    let (bottom, top) = (trace.y_ends.start, trace.y_ends.end);
    let mark_style = BLACK.mix(0.45).stroke_width(1);
    let mark_font = (FONT, 13).into_font().color(&BLACK.mix(0.7)).pos(Pos::new(HPos::Left, VPos::Top));
    for (x, label) in trace.marks.iter().filter(|(x, _)| x_ends.contains(x)) {
        // Dashed, in pixels (on a log axis, steps in data units would bunch up).
        let (px, py_top) = chart.backend_coord(&(*x, top));
        let (_, py_bottom) = chart.backend_coord(&(*x, bottom));
        for y in (py_top.min(py_bottom)..py_top.max(py_bottom)).step_by(9) {
            root.draw(&PathElement::new(vec![(px, y), (px, y + 4)], mark_style)).map_err(&fail)?;
        }
        if !label.is_empty() {
            root.draw(&Text::new(label.clone(), (px + 3, py_top + 3), mark_font.clone())).map_err(&fail)?;
        }
    }

    let mut occupied = Vec::new();
    let mut names = Vec::new();
    for (index, line) in trace.lines.iter().enumerate().filter(|(_, line)| !line.points.is_empty()) {
        let color = PALETTE[index % PALETTE.len()];
        let drawn = match trace.draw {
            Draw::Lines => chart.draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(1))),
            Draw::Dots => chart.draw_series(line.points.iter().map(|&point| Pixel::new(point, color))),
        };
        drawn
            .map_err(&fail)?
            .label(line.name)
            .legend(move |(x, y)| PathElement::new([(x - 12, y), (x + 12, y)], color.stroke_width(3)));
        // Every point would be millions of pixels to weigh for the legend: a few thousand do.
        let every = (line.points.len() / 2000).max(1);
        occupied.extend(line.points.iter().step_by(every).map(|point| chart.backend_coord(point)));
        names.push(line.name);
    }
    if names.len() > 1 {
        draw_legend(&mut chart, &names, &occupied).map_err(&fail)?;
    }
    root.present().map_err(&fail)
}

/// One bar of a [`bar_chart`]: label, median and optionally (p5, p95) for its whisker.
pub type BarEntry = (String, f64, Option<(f64, f64)>);

/// Draws one bar per `(label, median, Some((p5, p95)))` entry, with whiskers where given, into the
/// PNG `path`; the median is written above each bar.
pub fn bar_chart(path: &Path, title: &str, y_label: &str, bars: &[BarEntry], log_y: bool) -> Result<(), String> {
    prepare_file(path)?;
    if bars.is_empty() {
        return Err(format!("bar chart `{title}`: no bars to draw"));
    }
    let mut plot = BarPlot { title, y_label, groups: Vec::new(), series: Vec::new(), bars: Vec::new(), log_y };
    let mut left_out = Vec::new();
    for (group, (label, value, whisker)) in bars.iter().enumerate() {
        let finite = |v: f64| v.is_finite();
        if !finite(*value) || whisker.is_some_and(|(low, high)| !finite(low) || !finite(high)) {
            return Err(format!("bar chart `{title}`: `{label}` is not a finite number: {value} {whisker:?}"));
        }
        plot.groups.push(label);
        if log_y && *value <= 0.0 {
            left_out.push(format!("`{label}` ({value})"));
        } else {
            plot.bars.push(Bar { group, slot: 0, value: *value, whisker: *whisker });
        }
    }
    draw_bar_plot(path, &plot, &left_out)
}

/// Draws `values[s][g]`, the value of series `series_names[s]` in group `groups[g]`, as bars side by
/// side within each group, with a legend of the series, into the PNG `path`.
pub fn grouped_bar_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series_names: &[String],
    values: &[Vec<f64>],
    log_y: bool,
) -> Result<(), String> {
    prepare_file(path)?;
    if groups.is_empty() || series_names.is_empty() {
        return Err(format!(
            "grouped bar chart `{title}`: nothing to draw ({} groups, {} series)",
            groups.len(),
            series_names.len()
        ));
    }
    if values.len() != series_names.len() {
        return Err(format!(
            "grouped bar chart `{title}`: {} series names but {} rows of values",
            series_names.len(),
            values.len()
        ));
    }
    let mut plot = BarPlot {
        title,
        y_label,
        groups: groups.iter().map(String::as_str).collect(),
        series: series_names.iter().map(String::as_str).collect(),
        bars: Vec::new(),
        log_y,
    };
    let mut left_out = Vec::new();
    for (slot, (name, row)) in series_names.iter().zip(values).enumerate() {
        if row.len() != groups.len() {
            return Err(format!(
                "grouped bar chart `{title}`: series `{name}` has {} values for {} groups",
                row.len(),
                groups.len()
            ));
        }
        for (group, &value) in row.iter().enumerate() {
            if !value.is_finite() {
                return Err(format!(
                    "grouped bar chart `{title}`: `{name}` in `{}` is not a finite number: {value}",
                    groups[group]
                ));
            }
            if log_y && value <= 0.0 {
                left_out.push(format!("`{name}` in `{}` ({value})", groups[group]));
            } else {
                plot.bars.push(Bar { group, slot, value, whisker: None });
            }
        }
    }
    draw_bar_plot(path, &plot, &left_out)
}

/// Checks that `path` names a PNG file and creates the folder it goes in.
fn prepare_file(path: &Path) -> Result<(), String> {
    if !path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        return Err(format!("{}: charts are written as PNG, so the name must end in .png", path.display()));
    }
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => {
            std::fs::create_dir_all(folder).map_err(|e| format!("cannot create {}: {e}", folder.display()))
        }
        _ => Ok(()),
    }
}

/// Describes a `plotters` failure while drawing `path`.
fn failed<E: std::error::Error + Send + Sync>(path: &Path) -> impl Fn(DrawingAreaErrorKind<E>) -> String + '_ {
    move |error| format!("{}: cannot draw the chart: {error}", path.display())
}

/// The smallest and largest of the values added.
#[derive(Clone, Copy, Debug)]
struct Extent {
    min: f64,
    max: f64,
}

impl Extent {
    const EMPTY: Extent = Extent { min: f64::INFINITY, max: f64::NEG_INFINITY };

    fn add(&mut self, value: f64) {
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    fn is_empty(&self) -> bool {
        self.min > self.max
    }
}

/// A linear axis around `extent` with a small margin, reaching to zero when `from_zero`, with
/// `headroom` (a share of the span) added on top for labels.
fn linear_range(extent: Extent, from_zero: bool, headroom: f64) -> Range<f64> {
    let (low, high) = if from_zero { (extent.min.min(0.0), extent.max.max(0.0)) } else { (extent.min, extent.max) };
    let span = if high > low { high - low } else { high.abs().max(1.0) };
    let below = if from_zero && low == 0.0 { 0.0 } else { 0.05 * span };
    let above = if from_zero && high == 0.0 { 0.0 } else { (0.05 + headroom) * span };
    (low - below)..(high + above)
}

/// A logarithmic axis around `extent` (positive values) with a small margin.
fn log_range(extent: Extent) -> Range<f64> {
    (extent.min / 1.3)..(extent.max * 1.3)
}

/// A log axis over `range` (positive), ticked at 1, 2 and 5 times powers of ten (at fewer or more
/// values when the range is wide or narrow), with faint lines at every digit times a power of ten.
///
/// `plotters`' own ticks leave the stretch below the first power of ten unlabelled.
fn log_axis(range: Range<f64>) -> WithKeyPoints<LogCoord<f64>> {
    let digits = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let mut ticks = powers_of_ten_times(&range, &[1.0, 2.0, 5.0]);
    if ticks.len() < 3 {
        ticks = powers_of_ten_times(&range, &digits);
    }
    if ticks.len() < 3 {
        // Narrower than the step between digits: five ticks evenly apart on the axis.
        let ratio = range.end / range.start;
        ticks = (0..5).map(|step| range.start * ratio.powf((0.5 + f64::from(step)) / 5.0)).collect();
    } else if ticks.len() > 12 {
        ticks = powers_of_ten_times(&range, &[1.0]);
        let every = ticks.len().div_ceil(12);
        ticks = ticks.into_iter().step_by(every).collect();
    }
    let faint = powers_of_ten_times(&range, &digits);
    range.log_scale().with_key_points(ticks).with_light_points(faint)
}

/// The values `m * 10^e` within `range` for each `m` of `mantissas`, ascending.
fn powers_of_ten_times(range: &Range<f64>, mantissas: &[f64]) -> Vec<f64> {
    let (first, last) = (range.start.log10().floor() as i32, range.end.log10().ceil() as i32);
    (first..=last)
        .flat_map(|exponent| mantissas.iter().map(move |m| m * 10f64.powi(exponent)))
        .filter(|value| range.contains(value))
        .collect()
}

/// The power of ten a little below `value` (positive), where log-scaled bars start.
fn decade_below(value: f64) -> f64 {
    let decade = 10f64.powf(value.log10().floor());
    if decade > value * 0.8 {
        decade / 10.0
    } else {
        decade
    }
}

/// A short label for an axis tick or a bar: decimals for everyday magnitudes, scientific notation
/// for very large or small ones, without trailing zeros.
fn tick_label(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 {
        return "0".to_string();
    }
    if !(1e-3..1e6).contains(&magnitude) {
        let text = format!("{value:.2e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        return format!("{}e{exponent}", trim_zeros(mantissa));
    }
    let decimals = if magnitude >= 100.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        4
    };
    trim_zeros(&format!("{value:.decimals$}")).to_string()
}

/// `text` (a decimal number) without the zeros ending its fraction, nor a bare point.
fn trim_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Title and axis descriptions of a line chart.
struct Texts<'a> {
    title: &'a str,
    x: &'a str,
    y: &'a str,
}

/// A series ready to draw: only the points the axes can show.
struct Line<'a> {
    name: &'a str,
    points: Vec<(f64, f64)>,
    /// (x, p5, y, p95) of each point that has an error bar.
    whiskers: Vec<(f64, f64, f64, f64)>,
}

/// Checks `series` and keeps the points that the axes can show, with a note about the others.
fn prepare_line<'a>(title: &str, series: &'a Series, log_x: bool, log_y: bool) -> Result<Line<'a>, String> {
    let name = &series.name;
    let whiskers = series.low_high.as_deref();
    if let Some(whiskers) = whiskers.filter(|w| w.len() != series.points.len()) {
        return Err(format!(
            "line chart `{title}`: series `{name}` has {} points but {} (p5, p95) pairs",
            series.points.len(),
            whiskers.len()
        ));
    }
    let mut line = Line { name, points: Vec::new(), whiskers: Vec::new() };
    let mut left_out = 0;
    for (index, &(x, y)) in series.points.iter().enumerate() {
        let whisker = whiskers.map(|w| w[index]);
        let finite = x.is_finite() && y.is_finite();
        if !finite || whisker.is_some_and(|(low, high)| !low.is_finite() || !high.is_finite()) {
            return Err(format!(
                "line chart `{title}`: point {index} of series `{name}` is not finite: ({x}, {y}) {whisker:?}"
            ));
        }
        if (log_x && x <= 0.0) || (log_y && y <= 0.0) {
            left_out += 1;
            continue;
        }
        line.points.push((x, y));
        if let Some((low, high)) = whisker {
            line.whiskers.push((x, low, y, high));
        }
    }
    if left_out > 0 {
        eprintln!("xtask: chart `{title}`: left out {left_out} point(s) of `{name}` at zero or below on a log axis");
    }
    Ok(line)
}

/// Draws a line chart on the axes `x_spec` and `y_spec`; `floor` is the bottom of the y axis.
fn render_lines<X, Y>(
    path: &Path,
    texts: &Texts,
    lines: &[Line],
    x_spec: X,
    y_spec: Y,
    floor: f64,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let fail = failed(path);
    let root = BitMapBackend::new(path, LINE_SIZE).into_drawing_area();
    let mut chart = chart_frame(&root, texts, x_spec, y_spec).map_err(&fail)?;

    let mut occupied = Vec::new();
    let mut names = Vec::new();
    for (index, line) in lines.iter().enumerate().filter(|(_, line)| !line.points.is_empty()) {
        let color = PALETTE[index % PALETTE.len()];
        let whisker_style = color.mix(0.75).stroke_width(1);
        let ends = |&(x, low, _, high): &(f64, f64, f64, f64)| ((x, low.max(floor)), (x, high));
        chart
            .draw_series(line.whiskers.iter().map(ends).map(|(low, high)| PathElement::new([low, high], whisker_style)))
            .map_err(&fail)?;
        chart
            .draw_series(
                line.whiskers
                    .iter()
                    .map(ends)
                    .flat_map(|(low, high)| [low, high])
                    .map(|end| EmptyElement::at(end) + PathElement::new([(-5, 0), (5, 0)], whisker_style)),
            )
            .map_err(&fail)?;
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(2)))
            .map_err(&fail)?
            .label(line.name)
            .legend(move |at| Marker { at, shape: index, color, with_line: true });
        chart
            .draw_series(line.points.iter().map(|&at| Marker { at, shape: index, color, with_line: false }))
            .map_err(&fail)?;

        occupied.extend(trace(line.points.iter().map(|point| chart.backend_coord(point))));
        for whisker in &line.whiskers {
            let (low, high) = ends(whisker);
            occupied.extend(trace([chart.backend_coord(&low), chart.backend_coord(&high)].into_iter()));
        }
        names.push(line.name);
    }

    draw_legend(&mut chart, &names, &occupied).map_err(&fail)?;
    root.present().map_err(&fail)
}

/// Draws the series legend in the plot corner that covers the fewest `occupied` points.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    names: &[&str],
    occupied: &[(i32, i32)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let corner = quiet_corner(chart.plotting_area().get_pixel_range(), legend_size(names, 16), occupied);
    chart
        .configure_series_labels()
        .position(corner)
        .margin(12)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()
}

/// A point marker at `at`: by `shape` a circle, triangle, square or cross, in turn; `with_line`, on
/// a short stretch of line, as the legend shows a series.
struct Marker<C> {
    at: C,
    shape: usize,
    color: RGBColor,
    with_line: bool,
}

impl<'a, C: 'a> PointCollection<'a, C> for &'a Marker<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;

    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Marker<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut pixels: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pixels.next() else {
            return Ok(());
        };
        let (fill, stroke) = (self.color.filled(), self.color.stroke_width(2));
        if self.with_line {
            backend.draw_line((x - 12, y), (x + 12, y), &stroke)?;
        }
        match self.shape % 4 {
            0 => backend.draw_circle((x, y), 4, &fill, true),
            1 => backend.fill_polygon([(x, y - 6), (x - 6, y + 4), (x + 6, y + 4)], &fill),
            2 => backend.draw_rect((x - 4, y - 4), (x + 4, y + 4), &fill, true),
            _ => {
                backend.draw_line((x - 4, y - 4), (x + 4, y + 4), &stroke)?;
                backend.draw_line((x - 4, y + 4), (x + 4, y - 4), &stroke)
            }
        }
    }
}

/// Pixels along the polyline through `points`, a few per segment, to tell where the data lies.
fn trace(points: impl Iterator<Item = (i32, i32)>) -> Vec<(i32, i32)> {
    const STEPS: i32 = 16;
    let points: Vec<_> = points.collect();
    let mut pixels = points.clone();
    for pair in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        pixels.extend((1..STEPS).map(|step| (x0 + (x1 - x0) * step / STEPS, y0 + (y1 - y0) * step / STEPS)));
    }
    pixels
}

/// Rough pixel size of a legend listing `names` in a font of `font_size` pixels.
fn legend_size(names: &[&str], font_size: u32) -> (i32, i32) {
    let font = (FONT, font_size).into_font();
    let widest = names.iter().map(|name| font.box_size(name).map_or(name.len() as u32 * font_size, |(w, _)| w)).max();
    let rows = names.len() as i32;
    (widest.unwrap_or(0) as i32 + 70, rows * (font_size as i32 + 10) + 20)
}

/// The corner of the plotting `area` where a legend of `size` pixels (12 pixels in from the edges)
/// hides the fewest `occupied` pixels; the upper left one when several tie.
fn quiet_corner(area: (Range<i32>, Range<i32>), size: (i32, i32), occupied: &[(i32, i32)]) -> SeriesLabelPosition {
    let (xs, ys) = area;
    let (left, right) = (xs.start + 12, xs.end - 12 - size.0);
    let (top, bottom) = (ys.start + 12, ys.end - 12 - size.1);
    let corners = [
        (SeriesLabelPosition::UpperLeft, left, top),
        (SeriesLabelPosition::UpperRight, right, top),
        (SeriesLabelPosition::LowerRight, right, bottom),
        (SeriesLabelPosition::LowerLeft, left, bottom),
    ];
    let hidden = |x0: i32, y0: i32| {
        occupied.iter().filter(|&&(x, y)| (x0..x0 + size.0).contains(&x) && (y0..y0 + size.1).contains(&y)).count()
    };
    corners
        .into_iter()
        .min_by_key(|&(_, x0, y0)| hidden(x0, y0))
        .map_or(SeriesLabelPosition::UpperLeft, |(corner, _, _)| corner)
}

/// One bar: `group` places it along x, `slot` (its series) within the group.
struct Bar {
    group: usize,
    slot: usize,
    value: f64,
    /// (p5, p95).
    whisker: Option<(f64, f64)>,
}

/// A bar chart ready to draw.
struct BarPlot<'a> {
    title: &'a str,
    y_label: &'a str,
    /// Labels along x.
    groups: Vec<&'a str>,
    /// Legend names, one per slot; empty for a single unnamed series (no legend).
    series: Vec<&'a str>,
    bars: Vec<Bar>,
    log_y: bool,
}

impl BarPlot<'_> {
    fn slots(&self) -> usize {
        self.series.len().max(1)
    }

    /// Left and right end of `bar` along x, where group `g` spans `g..g + 1`.
    fn span(&self, bar: &Bar) -> (f64, f64) {
        let width = BAR_FILL / self.slots() as f64;
        let left = bar.group as f64 + (1.0 - BAR_FILL) / 2.0 + bar.slot as f64 * width;
        let gap = if self.slots() > 1 { 0.06 * width } else { 0.0 };
        (left + gap, left + width - gap)
    }

    /// Pixel width of the image: enough for each group's label and bars.
    fn width(&self) -> u32 {
        let font = (FONT, 15).into_font();
        let label = self.groups.iter().map(|g| font.box_size(g).map_or(g.len() as u32 * 9, |(w, _)| w)).max();
        let per_group = (label.unwrap_or(0) + 24).max(self.slots() as u32 * 30 + 24).max(90);
        (140 + self.groups.len() as u32 * per_group).clamp(640, 4000)
    }
}

/// Notes the bars that a log axis cannot show, then draws the rest.
fn draw_bar_plot(path: &Path, plot: &BarPlot, left_out: &[String]) -> Result<(), String> {
    let title = plot.title;
    if !left_out.is_empty() {
        eprintln!("xtask: chart `{title}`: left out {} at zero or below on a log axis", left_out.join(", "));
    }
    if plot.bars.is_empty() {
        return Err(format!("bar chart `{title}`: no bars to draw"));
    }
    ensure_font()?;
    let mut ys = Extent::EMPTY;
    for bar in &plot.bars {
        ys.add(bar.value);
        for end in bar.whisker.iter().flat_map(|&(low, high)| [low, high]) {
            if !plot.log_y || end > 0.0 {
                ys.add(end);
            }
        }
    }
    if plot.log_y {
        let bottom = decade_below(ys.min);
        render_bars(path, plot, log_axis(bottom..ys.max * 2.0), bottom, bottom)
    } else {
        let range = linear_range(ys, true, 0.08);
        let bottom = range.start;
        render_bars(path, plot, range, 0.0, bottom)
    }
}

/// Draws a bar chart on the y axis `y_spec`; bars rise from `base`, and `bottom` is the axis end.
fn render_bars<Y>(path: &Path, plot: &BarPlot, y_spec: Y, base: f64, bottom: f64) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let fail = failed(path);
    let root = BitMapBackend::new(path, (plot.width(), BAR_HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&fail)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(plot.title, (FONT, 26))
        .margin(18)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..plot.groups.len() as f64, y_spec)
        .map_err(&fail)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(plot.y_label)
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .y_label_formatter(&|v| tick_label(*v))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(&fail)?;

    if bottom < base {
        // Negative bars hang below zero: mark where they start.
        let zero = PathElement::new([(0.0, base), (plot.groups.len() as f64, base)], BLACK.mix(0.6).stroke_width(1));
        chart.draw_series([zero]).map_err(&fail)?;
    }
    for slot in 0..plot.slots() {
        let color = PALETTE[slot % PALETTE.len()];
        let bars = plot.bars.iter().filter(|bar| bar.slot == slot).map(|bar| {
            let (left, right) = plot.span(bar);
            Rectangle::new([(left, base), (right, bar.value)], color.filled())
        });
        let drawn = chart.draw_series(bars).map_err(&fail)?;
        if let Some(&name) = plot.series.get(slot) {
            drawn.label(name).legend(move |(x, y)| Rectangle::new([(x - 7, y - 7), (x + 7, y + 7)], color.filled()));
        }
    }

    let whisker_style = BLACK.stroke_width(1);
    let whiskers: Vec<_> = plot
        .bars
        .iter()
        .filter_map(|bar| {
            let (left, right) = plot.span(bar);
            let middle = (left + right) / 2.0;
            bar.whisker.map(|(low, high)| ((middle, low.max(bottom)), (middle, high)))
        })
        .collect();
    chart
        .draw_series(whiskers.iter().map(|&(low, high)| PathElement::new([low, high], whisker_style)))
        .map_err(&fail)?;
    chart
        .draw_series(
            whiskers
                .iter()
                .flat_map(|&(low, high)| [low, high])
                .map(|end| EmptyElement::at(end) + PathElement::new([(-6, 0), (6, 0)], whisker_style)),
        )
        .map_err(&fail)?;

    let value_font = (FONT, 13).into_font().color(&BLACK.mix(0.8)).pos(Pos::new(HPos::Center, VPos::Bottom));
    let mut occupied = Vec::new();
    for bar in &plot.bars {
        let (left, right) = plot.span(bar);
        let top = bar.whisker.map_or(bar.value, |(_, high)| high.max(bar.value)).max(base);
        let (x0, y0) = chart.backend_coord(&(left, top));
        let (x1, y1) = chart.backend_coord(&(right, base));
        for step in 0..=8 {
            occupied.push((x0 + (x1 - x0) * step / 8, y0));
            occupied.push(((x0 + x1) / 2, y0 + (y1 - y0) * step / 8));
        }
        let text = tick_label(bar.value);
        let fits = value_font.font.box_size(&text).is_ok_and(|(w, _)| w as i32 <= x1 - x0 + 8);
        if fits {
            root.draw(&Text::new(text, ((x0 + x1) / 2, y0 - 4), value_font.clone())).map_err(&fail)?;
        }
    }

    let label_font = (FONT, 15).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (group, label) in plot.groups.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(group as f64 + 0.5, bottom));
        root.draw(&Text::new(label.to_string(), (x, y + 10), label_font.clone())).map_err(&fail)?;
    }

    if !plot.series.is_empty() {
        draw_legend(&mut chart, &plot.series, &occupied).map_err(&fail)?;
    }
    root.present().map_err(&fail)
}

/// Registers the font that `plotters` draws text with, once per process.
fn ensure_font() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY.get_or_init(register_system_font).clone()
}

fn register_system_font() -> Result<(), String> {
    let (path, bytes) = match find_font()? {
        Some(found) => found,
        None => {
            install_font_package()?;
            find_font()?
                .ok_or_else(|| format!("installed {FONT_PACKAGE} but still found none of {}", FONT_PATHS.join(", ")))?
        }
    };
    // `plotters` keeps registered fonts for the rest of the process and wants them `'static`: this
    // one copy is never freed.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    for family in [FONT, "serif", "monospace"] {
        register_font(family, FontStyle::Normal, bytes)
            .map_err(|_| format!("{}: not a usable TrueType or OpenType font", path.display()))?;
    }
    Ok(())
}

/// The path and contents of the font file that `REEF_PLOT_FONT` names, else of the first of
/// [`FONT_PATHS`] present; `None` when there is none.
fn find_font() -> Result<Option<(PathBuf, Vec<u8>)>, String> {
    if let Some(chosen) = std::env::var_os(FONT_VARIABLE).filter(|value| !value.is_empty()) {
        let path = PathBuf::from(chosen);
        return match std::fs::read(&path) {
            Ok(bytes) => Ok(Some((path, bytes))),
            Err(error) => Err(format!("{FONT_VARIABLE}={}: {error}", path.display())),
        };
    }
    Ok(FONT_PATHS.iter().find_map(|path| std::fs::read(path).ok().map(|bytes| (PathBuf::from(path), bytes))))
}

/// Installs [`FONT_PACKAGE`] with apt-get when we are root; else says what to install.
fn install_font_package() -> Result<(), String> {
    if !running_as_root() {
        return Err(format!(
            "no font for the text of charts (looked for {}): install one with `sudo apt-get install {FONT_PACKAGE}`, \
             or set {FONT_VARIABLE} to a .ttf file",
            FONT_PATHS.join(", ")
        ));
    }
    eprintln!("xtask: installing {FONT_PACKAGE} with apt-get for the text of charts");
    let install = ["install", "-y", "-qq", "--no-install-recommends", FONT_PACKAGE];
    if apt_get(&install).is_ok() {
        return Ok(());
    }
    // Without package lists (as on a fresh machine) apt-get cannot find the package: fetch them first.
    apt_get(&["update", "-qq"])?;
    apt_get(&install)
}

fn apt_get(arguments: &[&str]) -> Result<(), String> {
    let what = format!("apt-get {}", arguments.join(" "));
    let output = Command::new("apt-get")
        .args(arguments)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// Whether our effective user id is 0, read from /proc (xtask forbids the `unsafe` of `geteuid`).
fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uids = status.lines().find_map(|line| line.strip_prefix("Uid:"));
    uids.and_then(|ids| ids.split_whitespace().nth(1)) == Some("0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::coord::ranged1d::BoldPoints;

    /// A fresh path for a test chart in a temp folder of its own (tests run in parallel: a
    /// folder shared by all would be removed by one test's drop while another draws into it);
    /// the files stay when `REEF_KEEP_TEST_PLOTS` is set, for looking at them.
    struct TestFile(PathBuf);

    impl TestFile {
        fn new(name: &str) -> TestFile {
            let folder = std::env::temp_dir().join(format!("reef-xtask-plot-{}-{name}", std::process::id()));
            let path = folder.join(name);
            let _ = std::fs::remove_file(&path);
            TestFile(path)
        }

        /// Checks that a PNG of some substance was written.
        fn assert_png(&self) {
            let bytes = std::fs::read(&self.0).unwrap_or_else(|e| panic!("{}: {e}", self.0.display()));
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", self.0.display());
            assert!(bytes.len() > 8 * 1024, "{} is only {} bytes", self.0.display(), bytes.len());
        }
    }

    impl Drop for TestFile {
        fn drop(&mut self) {
            if std::env::var_os("REEF_KEEP_TEST_PLOTS").is_none() {
                let _ = std::fs::remove_file(&self.0);
                if let Some(folder) = self.0.parent() {
                    let _ = std::fs::remove_dir(folder);
                }
            }
        }
    }

    fn latency(name: &str, scale: f64) -> Series {
        let sizes = [64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0];
        let points: Vec<_> = sizes.iter().map(|&size| (size, scale * (200.0 + size / 40.0))).collect();
        let low_high = points.iter().map(|&(_, y)| (y * 0.85, y * 1.3)).collect();
        Series { name: name.to_string(), points, low_high: Some(low_high) }
    }

    #[test]
    fn line_chart_writes_a_png() {
        let file = TestFile::new("line.png");
        let series = [latency("Reef channel", 1.0), latency("Linux pipe", 2.5)];
        line_chart(&file.0, "Round trip by message size", "message size (bytes)", "latency (ns)", &series, true, true)
            .unwrap();
        file.assert_png();
    }

    #[test]
    fn line_chart_on_linear_axes_without_error_bars() {
        let file = TestFile::new("line-linear.png");
        let cores = Series {
            name: "boot".to_string(),
            points: vec![(1.0, 310.0), (2.0, 335.0), (3.0, 352.0), (4.0, 371.0)],
            low_high: None,
        };
        line_chart(&file.0, "Boot time by cores", "cores", "ms", &[cores], false, false).unwrap();
        file.assert_png();
    }

    #[test]
    fn trace_chart_draws_long_series_and_marks() {
        let file = TestFile::new("trace.png");
        let spectrum = |name: &str, level: f64| Series {
            name: name.to_string(),
            points: (1..5000)
                .map(|bin| (f64::from(bin) * 2.0, level * (1.0 + f64::from(bin % 50 == 0) * 30.0)))
                .collect(),
            low_high: None,
        };
        let marks = [(100.0, "timer 100 Hz".to_string()), (200.0, String::new()), (1e9, "off the axis".to_string())];
        trace_chart(
            &file.0,
            "PSD",
            ("Hz", "PSD"),
            &[spectrum("TC", 1e-6), spectrum("AC", 1e-8)],
            (true, true, Draw::Lines),
            &marks,
        )
        .unwrap();
        file.assert_png();
        let counts = Series {
            name: "counts".into(),
            points: (0..100_000).map(|i| (f64::from(i), 800.0)).collect(),
            low_high: None,
        };
        trace_chart(&file.0, "counts", ("s", "units"), &[counts], (false, false, Draw::Dots), &[]).unwrap();
        file.assert_png();
        assert!(trace_chart(&file.0, "none", ("x", "y"), &[], (false, false, Draw::Lines), &[]).is_err());
    }

    #[test]
    fn bar_chart_writes_a_png() {
        let file = TestFile::new("bars.png");
        let bars = [
            ("boot 1 core".to_string(), 312.0, Some((300.0, 340.0))),
            ("boot 4 cores".to_string(), 371.5, Some((350.0, 420.0))),
            ("ipc round trip".to_string(), 42.0, None),
        ];
        bar_chart(&file.0, "Boot", "ms", &bars, false).unwrap();
        file.assert_png();
    }

    #[test]
    fn grouped_bar_chart_writes_a_png() {
        let file = TestFile::new("grouped.png");
        let groups = ["null syscall", "channel send", "spawn"].map(String::from);
        let series = ["Reef", "Linux"].map(String::from);
        let values = [vec![80.0, 120.0, 45000.0], vec![95.0, 900.0, 120000.0]];
        grouped_bar_chart(&file.0, "Reef against Linux", "ns", &groups, &series, &values, true).unwrap();
        file.assert_png();
    }

    #[test]
    fn bar_chart_widens_for_many_labels() {
        let file = TestFile::new("many-bars.png");
        let bars: Vec<_> = (0..14)
            .map(|i| {
                (
                    format!("benchmark number {i}"),
                    f64::from(i) * 3.5 - 8.0,
                    Some((f64::from(i) * 3.0 - 10.0, f64::from(i) * 4.0)),
                )
            })
            .collect();
        bar_chart(&file.0, "Many benchmarks, some negative", "change (%)", &bars, false).unwrap();
        file.assert_png();
        let header = std::fs::read(&file.0).unwrap();
        let width = u32::from_be_bytes(header[16..20].try_into().unwrap());
        assert!(width > 14 * 100, "only {width} pixels wide");
    }

    #[test]
    fn empty_input_is_a_clear_error() {
        let file = TestFile::new("empty.png");
        let error = line_chart(&file.0, "t", "x", "y", &[], false, false).unwrap_err();
        assert!(error.contains("no series"), "{error}");
        let hollow = Series { name: "nothing".to_string(), ..Series::default() };
        let error = line_chart(&file.0, "t", "x", "y", &[hollow], false, false).unwrap_err();
        assert!(error.contains("no points"), "{error}");
        let error = bar_chart(&file.0, "t", "y", &[], false).unwrap_err();
        assert!(error.contains("no bars"), "{error}");
        let error = grouped_bar_chart(&file.0, "t", "y", &[], &[], &[], false).unwrap_err();
        assert!(error.contains("nothing to draw"), "{error}");
        assert!(!file.0.exists());
    }

    #[test]
    fn log_axes_leave_out_non_positive_values() {
        let file = TestFile::new("log-partial.png");
        let series = Series {
            name: "with zero".to_string(),
            points: vec![(0.0, 5.0), (1.0, 10.0), (10.0, 0.0), (100.0, 1000.0)],
            low_high: Some(vec![(4.0, 6.0), (-1.0, 12.0), (0.0, 1.0), (900.0, 1100.0)]),
        };
        line_chart(&file.0, "partly positive", "x", "y", &[series], true, true).unwrap();
        file.assert_png();

        let only_zero = Series { name: "zero".to_string(), points: vec![(1.0, 0.0), (2.0, -3.0)], low_high: None };
        let error = line_chart(&file.0, "t", "x", "y", &[only_zero], false, true).unwrap_err();
        assert!(error.contains("no points"), "{error}");
        let bars = [("idle".to_string(), 0.0, None)];
        let error = bar_chart(&file.0, "t", "y", &bars, true).unwrap_err();
        assert!(error.contains("no bars"), "{error}");
    }

    #[test]
    fn malformed_input_is_a_clear_error() {
        let file = TestFile::new("bad.png");
        let nan = Series { name: "nan".to_string(), points: vec![(1.0, f64::NAN)], low_high: None };
        let error = line_chart(&file.0, "t", "x", "y", &[nan], false, false).unwrap_err();
        assert!(error.contains("not finite"), "{error}");
        let short = Series { name: "short".to_string(), points: vec![(1.0, 1.0), (2.0, 2.0)], low_high: Some(vec![]) };
        let error = line_chart(&file.0, "t", "x", "y", &[short], false, false).unwrap_err();
        assert!(error.contains("2 points but 0"), "{error}");
        let groups = ["a".to_string()];
        let names = ["Reef".to_string(), "Linux".to_string()];
        let error = grouped_bar_chart(&file.0, "t", "y", &groups, &names, &[vec![1.0]], false).unwrap_err();
        assert!(error.contains("2 series names but 1 rows"), "{error}");
        let error = grouped_bar_chart(&file.0, "t", "y", &groups, &names[..1], &[vec![1.0, 2.0]], false).unwrap_err();
        assert!(error.contains("2 values for 1 groups"), "{error}");
        let error =
            bar_chart(&file.0.with_extension("svg"), "t", "y", &[("a".to_string(), 1.0, None)], false).unwrap_err();
        assert!(error.contains(".png"), "{error}");
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(250.0), "250");
        assert_eq!(tick_label(1.5), "1.5");
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(99.999), "100");
        assert_eq!(tick_label(2_000_000.0), "2e6");
        assert_eq!(tick_label(-1.25e-5), "-1.25e-5");
    }

    #[test]
    fn log_axes_have_ticks_however_wide() {
        let ticks = |range: Range<f64>| log_axis(range).key_points(BoldPoints(12));
        assert_eq!(ticks(150.0..8000.0), [200.0, 500.0, 1000.0, 2000.0, 5000.0]);
        assert_eq!(ticks(1e-3..1e20).len(), 12);
        assert_eq!(ticks(3.5..8.5), [4.0, 5.0, 6.0, 7.0, 8.0]);
        assert_eq!(ticks(1.05..1.4).len(), 5);
    }

    #[test]
    fn log_bars_start_a_decade_below() {
        assert_eq!(decade_below(45.0), 10.0);
        assert_eq!(decade_below(100.0), 10.0);
        assert_eq!(decade_below(0.5), 0.1);
    }
}
