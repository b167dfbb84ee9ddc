"""Reading a trace: its bytes in (files, standard input, gzip, URLs through sources/), its container
form, the events attribution needs decoded once, where the step names sit, and times as spanfix
computes with them. Nothing here knows what a step span means."""
