"""The diffusers runner: LTX-2 and Wan pipelines of diffusers, one arm per process, through diffusers'
attention dispatcher (its own backends, or harness backends registered with it)."""
