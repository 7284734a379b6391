
# --- worldtrace prompt sentinel -----------------------------------------------------------
# After every command, record its exit status, the shell's pid, a sequence number and the
# working directory, then signal the driver through a tmux wait-for channel. Nothing of this
# is drawn on screen, so the recorded screen is exactly what a person would see.
# The state file is rewritten in place (`>|`, whatever noclobber says) with one write, so a
# full disk does not stop it and the driver never reads half a line.
if [ -n "$TMUX" ] && [ -z "$__WT_HOOKED" ]; then
  __WT_HOOKED=1
  __wt_seq=0
  __wt_prompt_hook() {
    local rc=$?
    __wt_seq=$((__wt_seq + 1))
    printf '%s\t%s\t%s\t%s\n' "$rc" "$$" "$__wt_seq" "$PWD" 2>/dev/null >| /run/wt/state
    tmux wait-for -S wt-prompt 2>/dev/null
    return $rc
  }
  PROMPT_COMMAND=__wt_prompt_hook
  PS1='\u@\h:\w\$ '
  HISTFILE=/dev/null
fi
