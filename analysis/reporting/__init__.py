"""The report: `report` runs every fit of `analyze` (and `plot`, `kaplan`) and writes the result;
`markdown` and `markdown_sections` write report.md (every string from data escaped first by
`markup`), `html` writes report.html (with the CSS and JS of html_assets/), `plots` draws the
figures, `output` publishes a report folder whole with its source fingerprint, and `design_note`
and `adaptive_report` add the Design and Adaptive sections read back from a store.
"""
