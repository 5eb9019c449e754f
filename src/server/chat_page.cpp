#include "server/chat_page.h"

namespace hayate::server {

namespace {

constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>hayate chat</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; display: flex; flex-direction: column;
         height: 100vh; color: #222; background: #fafafa; }
  header { padding: 8px 14px; background: #20232a; color: #eee; display: flex; gap: 14px;
           align-items: center; flex-wrap: wrap; }
  header b { color: #fff; }
  header label { font-size: 13px; }
  header input { width: 5em; }
  #messages { flex: 1; overflow-y: auto; padding: 14px; }
  .msg { max-width: 52em; margin: 0 0 10px; padding: 8px 12px; border-radius: 8px;
         white-space: pre-wrap; word-wrap: break-word; }
  .user { background: #dbeafe; margin-left: auto; }
  .assistant { background: #fff; border: 1px solid #ddd; }
  .error { background: #fee2e2; }
  form { display: flex; gap: 8px; padding: 10px 14px; border-top: 1px solid #ddd; background: #fff; }
  textarea { flex: 1; font: inherit; resize: vertical; min-height: 2.6em; }
  #status { font-size: 12px; color: #aaa; }
</style>
</head>
<body>
<header>
  <span>hayate &middot; <b id="model">(loading)</b></span>
  <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
  <label>top_p <input id="top_p" type="number" min="0.01" max="1" step="0.05" value="1"></label>
  <label>max tokens <input id="max_tokens" type="number" min="1" step="1" value="512"></label>
  <label>system <input id="system" type="text" style="width:14em" placeholder="(none)"></label>
  <label>API key <input id="api_key" type="password" style="width:8em"></label>
  <button id="clear" type="button">clear</button>
  <span id="status">ready</span>
</header>
<div id="messages"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];      // {role, content} of the conversation so far
let controller = null;   // the reply being streamed

$("api_key").value = localStorage.getItem("hayate_api_key") || "";
$("api_key").onchange = () => localStorage.setItem("hayate_api_key", $("api_key").value);

function headers() {
  const h = { "Content-Type": "application/json" };
  if ($("api_key").value) h["Authorization"] = "Bearer " + $("api_key").value;
  return h;
}

function status(text) { $("status").textContent = text; }

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    const j = await r.json();
    if (!r.ok) throw new Error(j.error ? j.error.message : r.status);
    $("model").textContent = j.data[0].id;
  } catch (e) {
    $("model").textContent = "(unavailable: " + e.message + ")";
    setTimeout(loadModel, 2000);
  }
}

function number(id, fallback) {
  const v = parseFloat($(id).value);
  return Number.isFinite(v) ? v : fallback;
}

async function send(text) {
  history.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  const messages = [];
  if ($("system").value) messages.push({ role: "system", content: $("system").value });
  messages.push(...history);
  const body = {
    model: $("model").textContent, messages, stream: true,
    temperature: number("temperature", 0.7), top_p: number("top_p", 1),
    max_tokens: Math.max(1, Math.round(number("max_tokens", 512))),
  };
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  status("generating");
  let reply = "";
  let finish = null;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error(j.error ? j.error.message : "HTTP " + r.status);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (!event.startsWith("data: ")) continue;
        const data = event.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        for (const c of j.choices || []) {
          if (c.delta && c.delta.content) reply += c.delta.content;
          if (c.finish_reason) finish = c.finish_reason;
        }
        out.textContent = reply;
        $("messages").scrollTop = $("messages").scrollHeight;
      }
    }
    status("done (" + (finish || "end") + ")");
  } catch (e) {
    if (e.name === "AbortError") {
      status("stopped");
    } else {
      out.classList.add("error");
      out.textContent = reply + (reply ? "\n" : "") + "error: " + e.message;
      status("error");
    }
  } finally {
    history.push({ role: "assistant", content: reply });
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
}

$("form").onsubmit = (ev) => {
  ev.preventDefault();
  const text = $("input").value;
  if (!text.trim() || controller) return;
  $("input").value = "";
  send(text);
};
$("input").onkeydown = (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("form").requestSubmit(); }
};
$("stop").onclick = () => { if (controller) controller.abort(); };
$("clear").onclick = () => { history.length = 0; $("messages").textContent = ""; status("ready"); };
loadModel();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view chat_page_html() { return kPage; }

}  // namespace hayate::server
