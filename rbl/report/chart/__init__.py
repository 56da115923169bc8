"""rbl's own figures: a chart is data (model.py: panels holding what is drawn, with their axes'
titles and scales), laid out and written as SVG by svg.py, with each panel's ranges and ticks
(axes.py, ticks.py), the shapes of its data (marks.py), its legend (legend.py) and text measures
(text.py). A figure takes milliseconds and nothing is imported for it."""
