"""Streamlit rendering helpers for the dashboard (app.py and pages/).

The pages only collect inputs, call the cached engine and hand the trace to
these functions; nothing here changes how the pipeline ranks or validates.
"""
