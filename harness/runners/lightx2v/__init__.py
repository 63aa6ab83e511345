"""The LightX2V runner: ``runner`` in the harness; ``launch``, ``probe``, ``checkpoint`` in LightX2V's."""
