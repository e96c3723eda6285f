"""Find embedding clusters (gather + segment reduction) in HLO, outline them, and replace each
by an ``ember.<kind>`` typed-FFI custom-call. Entry point: ``rewrite_module``."""
