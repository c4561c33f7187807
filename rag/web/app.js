// The chat page of `rag serve`. Plain JS, no build step.
//
// Safety rule: every piece of text that comes from the server (answers, abstracts, titles,
// errors) is inserted with textContent / createTextNode, never as HTML. Nothing here uses
// innerHTML, insertAdjacentHTML or document.write.
"use strict";

const MARKER = /\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]/g;
const MAX_HISTORY = 20; // earlier messages sent with a question (the server allows 50)
const MAX_HISTORY_CHARS = 4000;

const $ = (id) => document.getElementById(id);
// `controller` aborts the answer in flight (Stop, New chat); `chat` counts conversations, so
// that an answer of a conversation the user cleared never joins the next one's history.
const state = {
  messages: [], turns: [], busy: false, controller: null, chat: 0, opener: null,
  apiKey: sessionStorage.getItem("rag-api-key") || "",
};

// -- small DOM helpers ----------------------------------------------------------------------

function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) {
    if (child === null || child === undefined || child === "") continue;
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function text(s) {
  return document.createTextNode(String(s));
}

function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  if (state.apiKey) h["Authorization"] = "Bearer " + state.apiKey;
  return h;
}

function scrollToBottom() {
  const conv = $("conversation");
  const last = conv.lastElementChild;
  if (last) last.scrollIntoView({ block: "end", behavior: "smooth" });
}

// -- server-sent events over fetch ----------------------------------------------------------

async function* readEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += decoder.decode(value, { stream: true });
    buffer = buffer.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
    if (done) return;
  }
}

// -- rendering an answer ----------------------------------------------------------------------

function findQuote(abstract, quote) {
  // [start, end] of the quote in the abstract: exact, else ignoring case and spacing.
  if (!quote) return null;
  const at = abstract.indexOf(quote);
  if (at >= 0) return [at, at + quote.length];
  const words = quote.replace(/\[\d+(?:,\s*\d+)*\]/g, " ").trim().split(/\s+/).filter(Boolean);
  if (!words.length) return null;
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const m = new RegExp(escaped.join("\\s+"), "i").exec(abstract);
  return m ? [m.index, m.index + m[0].length] : null;
}

function lead(abstract, words = 16) {
  const all = (abstract || "").split(/\s+/);
  return all.slice(0, words).join(" ") + (all.length > words ? " …" : "");
}

function basename(path) {
  return (path || "").split(/[\\/]/).pop();
}

function metaLine(c) {
  const bits = [];
  if (c.authors && c.authors.length) {
    bits.push(c.authors.slice(0, 4).join(", ") + (c.authors.length > 4 ? " et al." : ""));
  }
  const venue = [c.venue, c.year].filter((x) => x !== null && x !== undefined && x !== "").join(" ");
  if (venue) bits.push(venue);
  if (c.arxiv_id) bits.push("arXiv:" + c.arxiv_id);
  return bits.join(" · ");
}

function quoteNote(turn, n, sentence, span) {
  // What the highlight means. A sentence's marker highlights only that sentence's own
  // supporting passage; it never passes off another passage (the source's quote for some
  // other sentence, or the closest one to an unsupported sentence) as its support.
  if (!sentence) return span ? "Highlighted: the passage the answer relies on." : "";
  if (!sentence.supported) {
    return span
      ? "Highlighted: the closest passage, which does not support the sentence you clicked."
      : "No passage of this abstract supports the sentence you clicked.";
  }
  if (span) return "Highlighted: the passage that supports the sentence you clicked.";
  const other = (sentence.citations || []).find((k) => k !== n && turn.result.citations.some(
    (c) => c.n === k && findQuote(c.abstract, sentence.quote)));
  return other
    ? "The sentence you clicked is supported by source [" + other + "], not by a passage of this abstract."
    : "No single passage of this abstract is marked for the sentence you clicked.";
}

function openSource(turn, n, sentence) {
  const c = turn.result.citations.find((x) => x.n === n);
  if (!c) return;
  const span = showAbstract("Source [" + n + "]", c, sentence ? sentence.quote : c.quote);
  $("viewer-quote-note").textContent = quoteNote(turn, n, sentence, span);
  if (sentence && sentence.node) sentence.node.classList.add("active");
}

async function openNearest(p) {
  // A closest passage of an abstention: its paper's abstract, that passage marked.
  const response = await fetch("/papers/" + encodeURIComponent(p.paper_id), { headers: headers(false) })
    .catch(() => null);
  if (!response || !response.ok) {
    const why = response ? (await errorFrom(response)).message : "the server is not reachable";
    showAbstract("Closest passage", { ...p, abstract: p.quote }, null);
    $("viewer-quote-note").textContent = "Could not open this paper: " + why;
    return;
  }
  const span = showAbstract("Closest passage", await response.json(), p.quote);
  $("viewer-quote-note").textContent = span
    ? "Highlighted: the closest passage, which does not answer the question."
    : "";
}

function showAbstract(heading, c, quote) {
  // The viewer on one paper, `quote` marked where it is found; returns where ([start, end]).
  const viewer = $("viewer");
  if (!viewer.contains(document.activeElement)) state.opener = document.activeElement;
  viewer.hidden = false;
  $("viewer-n").textContent = heading;
  $("viewer-title").textContent = c.title || c.label || c.paper_id;
  const meta = metaLine(c);
  $("viewer-meta").textContent = [meta, "id " + c.paper_id, basename(c.source)]
    .filter(Boolean).join(" · ");

  const abstract = $("viewer-abstract");
  abstract.textContent = "";
  const span = findQuote(c.abstract, quote);
  if (span) {
    abstract.appendChild(text(c.abstract.slice(0, span[0])));
    abstract.appendChild(el("mark", "quote", c.abstract.slice(span[0], span[1])));
    abstract.appendChild(text(c.abstract.slice(span[1])));
  } else {
    abstract.appendChild(text(c.abstract));
  }
  for (const active of document.querySelectorAll(".sentence.active")) active.classList.remove("active");
  const mark = abstract.querySelector("mark");
  // Focus goes to the abstract, so that a keyboard reader is where they can read it;
  // Escape or × brings them back to the citation (closeViewer).
  viewer.focus({ preventScroll: true });
  if (window.matchMedia("(max-width: 900px)").matches) viewer.scrollIntoView({ behavior: "smooth" });
  else if (mark) mark.scrollIntoView({ block: "nearest" });
  return span;
}

function closeViewer() {
  const viewer = $("viewer");
  const inside = viewer.contains(document.activeElement);
  viewer.hidden = true;
  if (inside && state.opener && state.opener.isConnected) state.opener.focus();
}

function appendWithMarkers(parent, s, turn, sentence) {
  // Text with its [n] / [n, m] markers turned into buttons that open the abstracts.
  let last = 0;
  MARKER.lastIndex = 0;
  let m;
  while ((m = MARKER.exec(s)) !== null) {
    if (m.index > last) parent.appendChild(text(s.slice(last, m.index)));
    const group = el("span", "cite-group", "[");
    m[1].split(",").map((x) => parseInt(x, 10)).forEach((n, i) => {
      if (i) group.appendChild(text(", "));
      const known = turn.result.citations.some((c) => c.n === n);
      const button = el("button", "cite", String(n));
      button.type = "button";
      button.dataset.n = String(n);
      button.disabled = !known;
      button.title = known ? "Open the abstract of source " + n : "No such source";
      button.addEventListener("click", () => openSource(turn, n, sentence));
      group.appendChild(button);
    });
    group.appendChild(text("]"));
    parent.appendChild(group);
    last = m.index + m[0].length;
  }
  if (last < s.length) parent.appendChild(text(s.slice(last)));
}

// The class and title of a checked sentence: supported, contradicted (with the abstract's
// sentence that contradicts it), not supported; a citation rag added is said too.
function verdictClass(s) {
  const verdict = s.verdict || (s.supported ? "supported" : "not_supported");
  return "sentence " + (verdict === "supported" ? "supported" : verdict === "contradicted"
    ? "unsupported contradicted" : "unsupported") + (s.attributed ? " attributed" : "");
}

function verdictTitle(s) {
  if (s.verdict === "contradicted") return "Contradicted by the cited abstract: \u201c" + (s.quote || "") + "\u201d";
  if (!s.supported) return "Not supported by the cited abstract(s)";
  return s.attributed ? "Citation added by rag: the model cited no source that says this" : "";
}

function sentenceNode(s, turn) {
  const node = el("span", verdictClass(s));
  s.node = node;
  appendWithMarkers(node, s.text, turn, s);
  node.title = verdictTitle(s);
  if (s.verdict === "contradicted") {
    node.appendChild(el("span", "badge", "contradicted"));
  } else if (!s.supported) {
    node.appendChild(el("span", "badge", "not supported"));
  } else if (s.attributed) {
    node.appendChild(el("span", "badge added", "citation added by rag"));
  }
  return node;
}

function renderAnswerText(container, turn) {
  const { answer, sentences } = turn.result;
  container.textContent = "";
  // Place each checked sentence where it occurs in the answer; text between them (list
  // headers, bullets, line breaks) is kept as it is.
  const placed = [];
  let cursor = 0;
  for (const s of sentences) {
    const at = answer.indexOf(s.text, cursor);
    if (at < 0) {
      placed.length = 0;
      break;
    }
    placed.push([at, s]);
    cursor = at + s.text.length;
  }
  if (sentences.length && !placed.length) {
    sentences.forEach((s, i) => {
      if (i) container.appendChild(text(" "));
      container.appendChild(sentenceNode(s, turn));
    });
    return;
  }
  cursor = 0;
  for (const [at, s] of placed) {
    appendWithMarkers(container, answer.slice(cursor, at), turn, null);
    container.appendChild(sentenceNode(s, turn));
    cursor = at + s.text.length;
  }
  appendWithMarkers(container, answer.slice(cursor), turn, null);
}

function renderReferences(turn) {
  const list = el("ol", "references");
  for (const c of turn.result.citations) {
    const button = el("button", "cite ref-n", String(c.n));
    button.type = "button";
    button.dataset.n = String(c.n);
    button.title = "Open the abstract";
    button.addEventListener("click", () => openSource(turn, c.n, null));
    const item = el("li", "reference", el("span", "ref-marker", "[", button, "]"));
    const body = el("span", "ref-body", el("span", "ref-label", c.label || c.paper_id));
    if (c.title && c.title !== c.label) body.appendChild(el("span", "ref-title", c.title));
    else if (!c.title) body.appendChild(el("span", "ref-lead", lead(c.abstract)));
    const meta = metaLine(c);
    if (meta) body.appendChild(el("span", "ref-meta", meta));
    item.appendChild(body);
    list.appendChild(item);
  }
  return el("section", "refs", el("h3", null, "References"), list);
}

function renderTable(turn) {
  // A comparison: one row per paper, each cell with its citation markers as buttons.
  const t = turn.result.table;
  const head = el("tr", null, el("th", null, "Paper"), ...t.columns.map((c) => el("th", null, c)));
  const body = el("tbody");
  for (const row of t.rows) {
    const tr = el("tr", null, el("th", "row-label", row.label));
    for (const cell of row.cells) {
      const td = el("td", cell.supported === false ? "unsupported" : null);
      const marks = cell.citations.length ? " [" + cell.citations.join(", ") + "]" : "";
      appendWithMarkers(td, cell.text + marks, turn, null);
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  // In a box of its own that scrolls sideways when the table is wider than a phone.
  return el("div", "table-wrap", el("table", "comparison", el("thead", null, head), body));
}

function renderNearest(turn) {
  // Why the answer abstained: the closest passages, so the reader can judge the refusal.
  const list = el("ul", "nearest-list");
  for (const p of turn.result.nearest) {
    const open = el("button", "ref-label nearest-open", p.label || p.paper_id);
    open.type = "button";
    open.title = "Open the abstract";
    open.addEventListener("click", () => openNearest(p));
    list.appendChild(el("li", null, open, " ", el("q", null, p.quote)));
  }
  return el("section", "nearest", el("h3", null, "Closest passages, which do not answer the question"), list);
}

async function copyBibtex(turn, button, out) {
  // The cited papers as BibTeX from GET /papers?format=bibtex&id=...; shown as well as
  // copied, since the clipboard is refused on plain-HTTP pages other than localhost.
  const query = turn.result.citations.map((c) => "id=" + encodeURIComponent(c.paper_id)).join("&");
  const response = await fetch("/papers?format=bibtex&" + query, { headers: headers(false) });
  if (!response.ok) {
    out.hidden = false;
    out.textContent = "Could not export: " + (await errorFrom(response)).message;
    return;
  }
  const bib = await response.text();
  out.hidden = false;
  out.textContent = bib;
  try {
    await navigator.clipboard.writeText(bib);
    button.textContent = "BibTeX copied";
  } catch (err) {
    button.textContent = "BibTeX shown below: select and copy";
  }
}

function appendReferences(turn) {
  if (!turn.result.citations.length) return;
  turn.answer.appendChild(renderReferences(turn));
  const out = el("pre", "bibtex");
  out.hidden = true;
  const button = el("button", "copy-bibtex", "Copy BibTeX");
  button.type = "button";
  button.addEventListener("click", () => copyBibtex(turn, button, out));
  turn.answer.appendChild(el("div", "export", button, out));
}

function renderFinal(turn) {
  const r = turn.result;
  const box = turn.answer;
  box.classList.remove("streaming");
  box.classList.add("final");
  if (r.abstained) box.classList.add("abstained");
  turn.status.textContent = "";
  if (r.table) {
    turn.text.textContent = "";
    turn.text.appendChild(el("p", "table-lead", r.answer.split("\n\n")[0]));
    turn.text.appendChild(renderTable(turn));
  } else {
    renderAnswerText(turn.text, turn);
  }
  if (r.nearest && r.nearest.length) turn.text.appendChild(renderNearest(turn));

  const notes = turn.notes;
  notes.textContent = "";
  if (r.answerer === "extractive") {
    notes.appendChild(el("p", "note offline-note",
      "Answered offline, from the abstracts' own sentences: no language model was used."));
  }
  // A notice that is the answer itself ("No papers match the filters: ...") is said once.
  for (const n of r.notices) {
    if (n.trim() !== r.answer.trim()) notes.appendChild(el("p", "note notice", n));
  }
  const unsupported = r.sentences.filter((s) => !s.supported).length;
  if (unsupported) {
    notes.appendChild(el("p", "note unsupported-note",
      unsupported + (unsupported === 1 ? " sentence is" : " sentences are") +
      " not supported by the abstracts it cites (marked)."));
  }
  if (r.dropped_citations) {
    notes.appendChild(el("p", "note", r.dropped_citations + " citation(s) to no source were removed."));
  }
  appendReferences(turn);
  const answerer = r.answerer === "extractive" ? "offline" : r.answerer.replace(/^ollama:/, "");
  const total = r.timings_ms && r.timings_ms.total ? " · " + (r.timings_ms.total / 1000).toFixed(1) + " s" : "";
  box.appendChild(el("p", "answer-meta", answerer + total));
}

function showError(turn, err) {
  turn.answer.classList.remove("streaming");
  turn.answer.classList.add("failed");
  turn.status.textContent = "";
  if (err.partial && err.partial.answer) {
    // What came before the stream broke off, with its citations as on a whole answer: the
    // reader can still check each sentence against its abstract.
    turn.result = err.partial;
    renderAnswerText(turn.text, turn);
    appendReferences(turn);
  }
  for (const note of turn.notes.querySelectorAll(".notice")) {
    if (err.message && note.textContent.startsWith(err.message)) note.remove();
  }
  const box = el("div", "error", el("strong", null, err.incomplete ? "The answer is incomplete: " : "Error: "),
    err.message || "something went wrong");
  if (err.hint) box.appendChild(el("p", "hint", err.hint));
  turn.notes.appendChild(box);
}

function showStopped(turn) {
  turn.answer.classList.remove("streaming");
  turn.answer.classList.add("stopped");
  turn.status.textContent = "";
  turn.notes.appendChild(el("p", "note", "Stopped: the answer is incomplete."));
}

// -- asking ----------------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  $("send").hidden = busy;
  $("stop").hidden = !busy;
}

function stopAnswer() {
  // Aborting the request closes the connection; the server then stops the work and the model.
  const controller = state.controller;
  state.controller = null;
  if (controller) controller.abort();
  setBusy(false);
}

function newTurn(question) {
  $("empty").hidden = true;
  const turn = {};
  turn.text = el("div", "answer-text");
  turn.status = el("p", "answer-status", "Searching the abstracts…");
  turn.notes = el("div", "notes");
  turn.answer = el("div", "answer streaming", turn.status, turn.text, turn.notes);
  turn.root = el("article", "turn", el("div", "question", question), turn.answer);
  $("conversation").appendChild(turn.root);
  scrollToBottom();
  return turn;
}

function requestBody(question) {
  const history = state.messages.slice(-MAX_HISTORY).map((m) => ({
    role: m.role, content: m.content.slice(0, MAX_HISTORY_CHARS),
  }));
  const body = { messages: [...history, { role: "user", content: question }], stream: true };
  body.llm = $("llm").value;
  const venue = $("venue").value.trim();
  const year = $("year").value.trim();
  const author = $("author").value.trim();
  if (venue) body.venue = venue;
  if (year) body.year = year;
  if (author) body.author = author;
  return body;
}

async function errorFrom(response) {
  try {
    const body = await response.json();
    if (typeof body.error === "string") return { message: body.error, hint: body.hint };
  } catch (_) { /* not JSON */ }
  return { message: "the server answered " + response.status, hint: "" };
}

async function ask(question) {
  if (state.busy) return;
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  const chat = state.chat;
  const turn = newTurn(question);
  let finished = false;
  try {
    const response = await fetch("/chat", {
      method: "POST", headers: headers(true), body: JSON.stringify(requestBody(question)),
      signal: controller.signal,
    });
    if (response.status === 401) {
      $("key-form").hidden = false;
      $("api-key").focus();
    }
    if (!response.ok) {
      showError(turn, await errorFrom(response));
      keepQuestion(question);
      finished = true;
      return;
    }
    for await (const { event, data } of readEvents(response)) {
      if (controller.signal.aborted) break;
      if (event === "sentence") {
        // Each sentence arrives final (renumbered, checked): mark it as it comes.
        turn.status.textContent = "";
        const sep = data.delta.slice(0, data.delta.length - data.text.length);
        const body = data.delta.slice(sep.length);
        if (sep) turn.text.appendChild(text(sep));
        if (data.meta) {
          turn.text.appendChild(text(body));
        } else {
          const node = el("span", verdictClass(data), body);
          node.title = verdictTitle(data);
          turn.text.appendChild(node);
        }
      } else if (event === "progress") {
        turn.status.textContent = data.stage === "thinking" ? "thinking…" : data.stage + "…";
      } else if (event === "notice") {
        turn.notes.appendChild(el("p", "note notice", data.message));
      } else if (event === "final") {
        turn.result = data;
        renderFinal(turn);
        if (chat === state.chat) {
          state.messages.push({ role: "user", content: question },
            { role: "assistant", content: data.answer });
          state.turns.push({ question, result: data });
          saveChat();
        }
        finished = true;
      } else if (event === "error") {
        showError(turn, data);
        finished = true;
      }
    }
    if (controller.signal.aborted) {
      showStopped(turn);
    } else if (!finished) {
      showError(turn, { message: "the connection closed before the answer was complete",
        hint: "ask again; if it keeps happening, check the server's log", incomplete: true });
    }
  } catch (err) {
    if (controller.signal.aborted) {
      showStopped(turn);
    } else {
      showError(turn, { message: "could not reach the server (" + err.message + ")",
        hint: "is `rag serve` still running?" });
      keepQuestion(question);
    }
  } finally {
    if (state.controller === controller) {
      state.controller = null;
      setBusy(false);
    }
    scrollToBottom();
    refresh();
  }
}

function keepQuestion(question) {
  // A question that got no answer goes back into an empty box, to be sent again.
  if (!$("question").value.trim()) $("question").value = question;
}

// -- the conversation, kept across a reload of the tab ---------------------------------------

const SAVED = "rag-chat";

function saveChat() {
  const saved = { messages: state.messages, turns: state.turns.slice() };
  for (;;) {
    try {
      sessionStorage.setItem(SAVED, JSON.stringify(saved));
      return;
    } catch (_) {  // over the tab's storage quota: the oldest answers are not shown again
      if (!saved.turns.length) return;
      saved.turns.shift();
    }
  }
}

function restoreChat() {
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(SAVED) || "null");
  } catch (_) { /* not ours, or damaged: start afresh */ }
  if (!saved || !Array.isArray(saved.turns) || !Array.isArray(saved.messages)) return;
  try {
    for (const { question, result } of saved.turns) {
      const turn = newTurn(question);
      turn.result = result;
      renderFinal(turn);
    }
    state.messages = saved.messages;
    state.turns = saved.turns;
  } catch (_) {  // saved by another version of this page: start afresh
    sessionStorage.removeItem(SAVED);
    $("conversation").textContent = "";
    $("empty").hidden = false;
  }
}

// -- start-up --------------------------------------------------------------------------------

async function loadStatus() {
  try {
    const health = await (await fetch("/health")).json();
    $("corpus-size").textContent = String(health.papers);
    const o = health.ollama;
    $("status").textContent = o.model_present
      ? "Ollama: " + o.model + " ready"
      : (o.reachable ? "Ollama has no " + o.model + ": answers are offline"
        : "Ollama not running: answers are offline");
    $("status").classList.toggle("offline", !o.model_present);
    if (health.status === "error") {  // the index is gone or broken under the server
      $("status").textContent = "Index problem: " + (health.index_error || "see the server's log");
      $("status").classList.add("offline");
    }
    if (health.auth_required && !state.apiKey) $("key-form").hidden = false;
  } catch (_) {
    $("status").textContent = "server not reachable";
    $("status").classList.add("offline");
  }
}

async function loadVenues() {
  // The venue filter's suggestions (GET /venues: names and counts, not every paper's record).
  let venues;
  try {
    const response = await fetch("/venues", { headers: headers(false) });
    if (!response.ok) return;
    venues = (await response.json()).venues;
  } catch (_) {
    return;
  }
  const list = $("venues");
  list.textContent = "";
  for (const v of venues) {
    const option = document.createElement("option");
    option.value = v.venue;
    list.appendChild(option);
  }
}

async function refresh() {
  // After each answer: the index may have grown or shrunk under the server (`rag ingest`,
  // `--watch`), and the server or Ollama may have stopped or come back.
  const before = $("corpus-size").textContent;
  await loadStatus();
  if ($("corpus-size").textContent !== before) loadVenues();
}

function init() {
  $("ask-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const q = $("question").value.trim();
    if (!q || state.busy) return;  // while an answer comes, the question stays in the box
    $("question").value = "";
    ask(q);
  });
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("ask-form").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => {
    stopAnswer();
    $("question").focus();
  });
  $("new-chat").addEventListener("click", () => {
    stopAnswer();
    state.chat += 1;
    state.messages = [];
    state.turns = [];
    sessionStorage.removeItem(SAVED);
    $("conversation").textContent = "";
    $("viewer").hidden = true;
    $("empty").hidden = false;
    $("question").focus();
  });
  $("viewer-close").addEventListener("click", closeViewer);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("viewer").hidden) closeViewer();
  });
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.apiKey = $("api-key").value.trim();
    sessionStorage.setItem("rag-api-key", state.apiKey);
    $("key-form").hidden = true;
    loadVenues();
  });
  restoreChat();
  loadStatus();
  loadVenues();
  $("question").focus();
}

init();
