"""Analysis stage: a campaign compared, aggregated, tested and judged once, written as results.json
(``analyze.analyze_campaign``; its model, ``model``, is the contract with ``harness.report``). The
package imports nothing itself, so reading the model stays light.
"""
