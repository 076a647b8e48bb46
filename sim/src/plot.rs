//! SVG plots (plotters): origin load and concurrency over time per strategy, and client
//! latency percentiles per strategy.
