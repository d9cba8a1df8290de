"""The front end: spec text to the checked IR (the parser, the syntax tree, the type
checker) and the diagnostics that point into the text."""
