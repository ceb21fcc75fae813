"""The fabric's client: what a process of a fabric runs in place of the faces. Its connection to the
fabric, the stand-ins (proxies) for objects that live there, the faces' remote ``LLMDataDist`` and
``hixl.Hixl``, and the reads and writes of its own memory the fabric asks for."""
