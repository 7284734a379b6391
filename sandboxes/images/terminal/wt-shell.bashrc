
# --- worldtrace prompt sentinel -----------------------------------------------------------
# After every command, record its exit status, a sequence number and the working directory,
# then signal the driver through a tmux wait-for channel. Nothing of this is drawn on screen,
# so the recorded screen is exactly what a person would see.
if [ -n "$TMUX" ] && [ -z "$__WT_HOOKED" ]; then
  __WT_HOOKED=1
  __wt_seq=0
  __wt_prompt_hook() {
    local rc=$?
    __wt_seq=$((__wt_seq + 1))
    printf '%s\t%s\t%s\t%s\n' "$rc" "$$" "$__wt_seq" "$PWD" > /run/.wt-state.$$ \
      && mv -f /run/.wt-state.$$ /run/.wt-state
    tmux wait-for -S wt-prompt 2>/dev/null
    return $rc
  }
  PROMPT_COMMAND=__wt_prompt_hook
  PS1='\u@\h:\w\$ '
  HISTFILE=/dev/null
fi
