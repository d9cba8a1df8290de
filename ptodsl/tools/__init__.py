"""Around the compiler: the command line, tuning and its cache, the pytest plugin, progress
and report tables."""
