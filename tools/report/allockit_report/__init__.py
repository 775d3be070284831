"""allockit report: turns a `allockit compare`/`replay` results folder into plots and one
self-contained HTML page. Binning is done with numpy over whole columns, never per point."""
