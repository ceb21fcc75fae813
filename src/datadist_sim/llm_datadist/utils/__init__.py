"""Argument checks shared by every public method (real module: ``llm_datadist.utils.utils``)."""
