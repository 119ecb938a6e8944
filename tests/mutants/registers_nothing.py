"""Not a pass module: it registers nothing."""
VALUE = 1
