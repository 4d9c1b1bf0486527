"""dlbench report package: one module per report section, sharing common.py (loading) and style.py (look).

reports/report.py is the entry point; build() there calls the sections in order.
"""
