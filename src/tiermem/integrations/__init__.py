"""Adapters that plug tiermem into agent frameworks, one module per framework.

Each module needs its framework installed (an optional extra of the same name):

- :mod:`tiermem.integrations.langgraph`: ``TiermemStore``, a LangGraph ``BaseStore``;
- :mod:`tiermem.integrations.langchain`: ``TiermemChatMessageHistory``;
- :mod:`tiermem.integrations.openai_agents`: ``TiermemSession`` and ``context_instructions``;
- :mod:`tiermem.integrations.llama_index`: ``TiermemChatMemory`` and ``TiermemMemoryBlock``;
- :mod:`tiermem.integrations.autogen`: ``TiermemAutogenMemory``.

Importing this package imports no framework.
"""
