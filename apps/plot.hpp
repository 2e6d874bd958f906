#pragma once
// Plots of the ioattn program through gnuplot (Debian gnuplot-nox): a plot is written as three
// files beside each other, FILE.csv (the data), FILE.gp (the gnuplot script that reads it) and
// FILE.svg (the image gnuplot renders from the script). The script names the data and the image
// by the paths given, so `gnuplot FILE.gp` re-renders it from the directory ioattn ran in.

#include <string>
#include <vector>

namespace ioattn::app {

/// One named curve (line plots) or one bar of every group (bar plots).
struct PlotSeries {
    std::string name;
    std::string color; ///< "#rrggbb"
    int dash = 1;      ///< gnuplot dash type: 1 solid, 2 dashed, 3 dotted ...
};

/// A vertical (x) or horizontal (y) reference line with its label.
struct PlotMark {
    double at = 0;
    std::string label;
};

/// Curves y_s(x) over shared x values, drawn log-log (x in powers of two).
struct LinePlot {
    std::string title, x_label, y_label;
    std::vector<PlotSeries> series;
    std::vector<double> x;
    std::vector<std::vector<double>> y; ///< y[s][i] for series s at x[i]; NaN: no point
    std::vector<PlotMark> x_marks;      ///< vertical lines
};

/// Grouped bars: one group per category, one bar per series, linear y from 0.
struct BarPlot {
    std::string title, y_label;
    std::vector<PlotSeries> series;
    std::vector<std::string> groups;
    std::vector<std::vector<double>> y; ///< y[s][g]; NaN: no bar
    std::vector<PlotMark> y_marks;      ///< horizontal lines (rooflines)
};

/// One bar of a bar plot: its group, its series and its height.
struct Bar {
    std::string group, series;
    double y = 0;
};

/// A bar plot of `bars`: groups and series in the order they first appear, series colored from
/// a fixed palette; a (group, series) given twice keeps the last value.
BarPlot bar_plot_of(std::string title, std::string y_label, const std::vector<Bar>& bars);

/// The paths a plot of `svg` is written to: FILE.csv and FILE.gp beside FILE.svg.
struct PlotFiles {
    std::string svg, csv, script;
};

/// The files of --plot `svg`: the image as given, the data and script with its extension
/// replaced. Throws InvalidArgument naming `where` unless `svg` ends in ".svg".
PlotFiles plot_files(const std::string& svg, const char* where);

/// Writes the data and the script, then runs gnuplot on the script. Throws Error naming
/// `where`: a file that cannot be written; gnuplot not on PATH (after the data and script are
/// written: one line saying how to render them later); gnuplot failing.
void render(const LinePlot& plot, const PlotFiles& files, const char* where);
void render(const BarPlot& plot, const PlotFiles& files, const char* where);

/// Whether a gnuplot executable is on PATH.
bool gnuplot_available();

} // namespace ioattn::app
