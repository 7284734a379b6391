"""The model-driven policy: any OpenAI-compatible chat-completions endpoint acting in a domain.

One policy serves every domain (``policy: {kind: llm}``). Each domain says how it presents
itself to a model with an :class:`~worldtrace.collectors.llm.policy.AgentPrompt` (its system
prompt, its tools or its action grammar, its stop words); the rest is shared here:

- :mod:`.params`: the ``policy.params`` a user configures (model, endpoint, sampling, budgets);
- :mod:`.client`: the ``openai`` client with retries, a bound on requests in flight per
  endpoint, and the usage of each call;
- :mod:`.history`: the episode's history as chat messages, trimmed to a token budget;
- :mod:`.policy`: the policy that turns replies into the domain's actions.

See ``docs/llm-policy.md``.
"""
