"""Attribution: which model runner emitted every step span. The step-name grammar (naming), ranks,
the index of tracks and spans, the algorithm table, the verdicts and their evidence, the user's
patterns, inspect's report. Every command reads a trace through this front."""
