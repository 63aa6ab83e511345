"""The LightX2V runner: real LightX2V inferences under torchrun, one per arm.

``runner`` plans and finalizes runs in the harness process; ``launch`` runs inside every rank;
``schema`` is the scenario block (kept free of heavy imports).
"""
