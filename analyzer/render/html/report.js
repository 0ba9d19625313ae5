// Draws gpuleak-report's HTML page from the report's JSON in the page (the element gpuleak-data): per
// process the memory timeline with its markers and failures, the diagnosis, a flame graph of what holds
// the memory, and what a stretch selected on the timeline made. No library and no network.
"use strict";
(function () {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const report = JSON.parse(document.getElementById("gpuleak-data").textContent);

  function node(namespace, tag, attributes, children) {
    const element = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") element.textContent = value;
      else element.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) if (child !== null && child !== undefined) element.append(child);
    return element;
  }
  const html = (tag, attributes, ...children) => node(null, tag, attributes, children);
  const svg = (tag, attributes, ...children) => node(SVG_NS, tag, attributes, children);

  function bytes(value) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let magnitude = Math.abs(value);
    let unit = 0;
    while (magnitude >= 1024 && unit < units.length - 1) {
      magnitude /= 1024;
      unit += 1;
    }
    return (value < 0 ? "-" : "") + magnitude.toFixed(unit === 0 ? 0 : 1) + " " + units[unit];
  }
  function seconds(t) {
    if (t < 10) return t.toFixed(2) + " s";
    if (t < 600) return t.toFixed(1) + " s";
    return (t / 60).toFixed(1) + " min";
  }
  function plural(count, word, words) {
    return count + " " + (count === 1 ? word : words || word + "s");
  }
  // As the text report counts a site's allocations: "96 blocks", "3 device allocations".
  function allocations(kind, count) {
    return kind === "block" ? plural(count, "block") : plural(count, kind + " allocation");
  }

  // A Python frame of an installed package reads from the package on ("torch/nn/modules/linear.py").
  function shortFile(file) {
    for (const marker of ["/site-packages/", "/dist-packages/"]) {
      const at = file.lastIndexOf(marker);
      if (at >= 0) return file.slice(at + marker.length);
    }
    return file;
  }
  function baseName(file) {
    return file.slice(file.lastIndexOf("/") + 1);
  }
  // As the text report names frames: "train.py:88 in train_epoch", "keep_history  leak.cpp:23".
  function frameName(frame) {
    if (frame.python) return shortFile(frame.file) + (frame.line ? ":" + frame.line : "") + " in " + frame.name;
    return frame.line ? `${frame.name}  ${baseName(frame.file)}:${frame.line}` : frame.name;
  }
  function frameDetail(frame) {
    const lines = [frameName(frame)];
    if (!frame.python && frame.file) lines.push(frame.file + (frame.line ? ":" + frame.line : ""));
    if (frame.source_line) lines.push("`" + frame.source_line + "`");
    if (frame.library) lines.push("in " + frame.library);
    return lines.join("\n");
  }
  function frameClass(frame) {
    if (frame.program) return "program";
    if (frame.python) return "library";
    return "native";
  }

  const tooltip = html("div", { class: "tooltip", role: "tooltip" });
  document.body.append(tooltip);
  function showTooltip(event, text) {
    tooltip.textContent = text;
    tooltip.style.whiteSpace = "pre-wrap";
    tooltip.style.display = "block";
    const x = Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8);
    const y = Math.min(event.clientY + 14, window.innerHeight - tooltip.offsetHeight - 8);
    tooltip.style.left = Math.max(0, x) + "px";
    tooltip.style.top = Math.max(0, y) + "px";
  }
  function hideTooltip() {
    tooltip.style.display = "none";
  }

  // Where a site's memory was made, as the report names it: its innermost frame of the program's own
  // code, else its innermost Python frame, else its innermost frame.
  function siteName(site, frames) {
    const stack = site.frames.map((index) => frames[index]);
    const own = stack.find((frame) => frame.program) || stack.find((frame) => frame.python) || stack[0];
    return own ? frameName(own) : "(no stack)";
  }
  function stackText(site, frames) {
    return site.frames.map((index) => frameName(frames[index])).join("\n");
  }

  // The value of a series at time t: its last point at or before t.
  function valueAt(points, t) {
    let value = null;
    for (const [time, v] of points) {
      if (time > t) break;
      value = v;
    }
    return value;
  }

  // The timelines come as columns: {t_s: [...], reserved_bytes: [...], ...}; a null value was not read.
  function column(columns, key) {
    return columns.t_s.map((t, i) => [t, columns[key][i]]).filter(([, value]) => value !== null);
  }
  // What the driver said was used on a device, when it was asked (after the program's allocations and
  // frees): the whole device's, other processes' and libraries' memory too.
  function driverSeries(device, label) {
    const points = column(device.driver_used, "bytes");
    return points.length ? [{ key: "driver", label, points }] : [];
  }
  // The process's memory: its devices' (all of them together) and the host's.
  function processSeries(process) {
    const series = [];
    const devices = process.summary.devices || [];
    if (!process.host_only) {
      const where = devices.length > 1 ? "all devices" : "device";
      series.push({ key: "reserved", label: `reserved (${where})`, points: column(process.timeline, "reserved_bytes") });
      series.push({ key: "allocated", label: `allocated (${where})`, points: column(process.timeline, "allocated_bytes") });
      if (devices.length === 1) series.push(...driverSeries(devices[0], "used on the device, per its driver"));
    }
    const rss = column(process.host.timeline, "rss_bytes");
    const uss = column(process.host.timeline, "uss_bytes");
    if (rss.length) series.push({ key: "rss", label: "host RSS", points: rss });
    if (uss.length) series.push({ key: "uss", label: "host USS", points: uss });
    return series;
  }
  function deviceSeries(device) {
    return [
      { key: "reserved", label: "reserved", points: column(device.timeline, "reserved_bytes") },
      { key: "allocated", label: "allocated", points: column(device.timeline, "allocated_bytes") },
      ...driverSeries(device, "used, per the driver"),
    ];
  }

  // A timeline of `series` over the process's run, with its markers and `failures`; `name` says whose
  // memory it is. Dragging across it selects a stretch for onStretch(range, chart).
  function timelineFigure(process, series, name, failures, onStretch) {
    const width = 1180;
    const height = 260;
    const left = 70;
    const right = 14;
    const top = 24;
    const bottom = 30;
    const plotWidth = width - left - right;
    const plotHeight = height - top - bottom;

    let end = process.duration_s;
    let highest = 1;
    for (const { points } of series)
      for (const [t, v] of points) {
        end = Math.max(end, t);
        highest = Math.max(highest, v);
      }
    end = Math.max(end, 1e-6);
    const x = (t) => left + (t / end) * plotWidth;
    const y = (v) => top + plotHeight - (v / highest) * plotHeight;
    const time = (px) => Math.min(end, Math.max(0, ((px - left) / plotWidth) * end));

    const chart = svg("svg", {
      viewBox: `0 0 ${width} ${height}`,
      width: "100%",
      role: "img",
      "aria-label": `Memory of ${name} over ${seconds(end)}`,
      class: "timeline",
      "data-end-s": end,
      "data-highest-bytes": highest,
      "data-left": left,
      "data-top": top,
      "data-plot-width": plotWidth,
      "data-plot-height": plotHeight,
    });
    const axis = svg("g", { class: "axis" });
    for (let i = 0; i <= 4; i += 1) {
      const v = (highest * i) / 4;
      axis.append(svg("line", { x1: left, x2: width - right, y1: y(v), y2: y(v) }));
      axis.append(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", text: bytes(v) }));
    }
    // Ticks at round steps, with as many decimals as the step needs.
    const rough = end / 6;
    const power = Math.pow(10, Math.floor(Math.log10(rough)));
    const step = [1, 2, 5, 10].map((m) => m * power).find((candidate) => candidate >= rough);
    const decimals = Math.max(0, -Math.floor(Math.log10(step)));
    for (let t = 0; t <= end + step * 1e-9; t += step) {
      const anchor = t === 0 ? "start" : t + step > end ? "end" : "middle";
      axis.append(svg("text", { x: x(t), y: height - 10, "text-anchor": anchor, text: t.toFixed(decimals) + " s" }));
    }
    chart.append(axis);

    const markers = process.markers || [];
    const markerLayer = svg("g", { class: "markers" });
    for (const marker of markers) {
      markerLayer.append(svg("line", { class: "marker-line", x1: x(marker.t_s), x2: x(marker.t_s), y1: top, y2: top + plotHeight }));
    }
    chart.append(markerLayer);
    const selection = svg("rect", { class: "selection", x: 0, y: top, width: 0, height: plotHeight, visibility: "hidden" });
    chart.append(selection);
    for (const { key, points } of series) {
      chart.append(svg("polyline", {
        class: "series " + key,
        "data-series": key,
        // Steps: a total holds until the next point, where it jumps. Point i is vertex 2i.
        points: points.map(([t, v], i) => {
          const at = x(t).toFixed(2) + ",";
          return (i > 0 ? at + y(points[i - 1][1]).toFixed(2) + " " : "") + at + y(v).toFixed(2);
        }).join(" "),
      }));
      // A line of one point draws nothing: a dot.
      if (points.length === 1)
        chart.append(svg("circle", { class: "dot " + key, cx: x(points[0][0]).toFixed(2), cy: y(points[0][1]).toFixed(2), r: 3 }));
    }
    for (const failure of failures) {
      const at = x(failure.t_s);
      const mark = svg("path", { class: "failure-mark", d: `M${at - 5},${top - 12} L${at + 5},${top - 12} L${at},${top - 3} Z` });
      mark.append(svg("title", { text: `${failure.out_of_memory ? "out of memory" : "failed"}: ${bytes(failure.bytes)} at ${seconds(failure.t_s)}` }));
      chart.append(mark);
    }
    const cursor = svg("line", { class: "cursor", x1: 0, x2: 0, y1: top, y2: top + plotHeight, visibility: "hidden" });
    chart.append(cursor);

    const readout = html("div", { class: "readout mono", "aria-live": "polite" });
    const legend = html("div", { class: "legend" });
    for (const { key, label } of series) {
      const swatch = html("i");
      swatch.style.background = `var(--${key})`;
      legend.append(html("span", {}, swatch, label));
    }
    if (markers.length) {
      const every = markers.length < process.markers_set ? `, ${markers.length} of them drawn` : "";
      legend.append(html("span", { class: "muted", text: `${plural(process.markers_set, "marker")} (grey lines${every})` }));
    }
    if (failures.length) legend.append(html("span", { class: "muted", text: "failures: red triangles" }));

    function pointerX(event) {
      const box = chart.getBoundingClientRect();
      return ((event.clientX - box.left) / box.width) * width;
    }
    function describe(t) {
      const parts = series.map(({ label, points }) => {
        const v = valueAt(points, t);
        return v === null ? null : `${label} ${bytes(v)}`;
      }).filter((part) => part);
      let during = null;
      for (const marker of markers) if (marker.t_s <= t) during = marker.label;
      return `at ${seconds(t)}: ${parts.join(", ")}` + (during !== null ? ` — after marker "${during}"` : "");
    }
    let dragFrom = null;
    chart.addEventListener("mousemove", (event) => {
      const px = Math.min(width - right, Math.max(left, pointerX(event)));
      cursor.setAttribute("x1", px);
      cursor.setAttribute("x2", px);
      cursor.setAttribute("visibility", "visible");
      readout.textContent = describe(time(px));
      if (dragFrom !== null) {
        selection.setAttribute("x", Math.min(dragFrom, px));
        selection.setAttribute("width", Math.abs(px - dragFrom));
        selection.setAttribute("visibility", "visible");
      }
    });
    chart.addEventListener("mouseleave", () => cursor.setAttribute("visibility", "hidden"));
    chart.addEventListener("mousedown", (event) => {
      dragFrom = Math.min(width - right, Math.max(left, pointerX(event)));
      event.preventDefault();
    });
    window.addEventListener("mouseup", (event) => {
      if (dragFrom === null) return;
      const to = Math.min(width - right, Math.max(left, pointerX(event)));
      const from = dragFrom;
      dragFrom = null;
      if (Math.abs(to - from) < 3) {
        selection.setAttribute("visibility", "hidden");
        onStretch(null, chart);
        return;
      }
      onStretch([time(Math.min(from, to)), time(Math.max(from, to))], chart);
    });

    const captions = ["Drag across the timeline to see what that stretch made and still holds, and what it freed."];
    if (series.some(({ key }) => key === "driver"))
      captions.push("The driver's line is the whole device's memory in use, every process's and library's, drawn when the " +
        "driver said it (after one of the program's allocations or frees). Each of gpuleak's samples keeps the driver's latest " +
        "answer, so the line may skip answers between two samples, and it ends at the last answer.");
    return html("figure", {},
      chart,
      legend,
      readout,
      html("figcaption", { text: captions.join(" ") }));
  }

  // The sites of a state as a tree, outermost frames first; runs of a library's frames become one box
  // unless they are shown.
  function buildTree(state, frames, collapse) {
    const root = { label: "all", frame: null, bytes: 0, count: 0, children: new Map(), sites: [], kind: "root" };
    for (const site of state.sites) {
      root.bytes += site.bytes;
      root.count += site.count;
      let at = root;
      const path = site.frames.slice().reverse();
      for (let i = 0; i < path.length; i += 1) {
        const frame = frames[path[i]];
        let key = "f" + path[i];
        let label = frameName(frame);
        let kind = site.kind === "other" ? "other" : frameClass(frame);
        if (collapse && !frame.program && frame.library) {
          let j = i;
          while (j + 1 < path.length && !frames[path[j + 1]].program && frames[path[j + 1]].library === frame.library) j += 1;
          if (j > i) {
            key = "l" + frame.library;
            label = `${frame.library} (${j - i + 1} frames)`;
            i = j;
          }
        }
        let child = at.children.get(key);
        if (!child) {
          child = { label, frame, bytes: 0, count: 0, children: new Map(), sites: [], kind };
          at.children.set(key, child);
        }
        child.bytes += site.bytes;
        child.count += site.count;
        at = child;
      }
      at.sites.push(site);
    }
    if (state.cached_bytes) {
      root.bytes += state.cached_bytes;
      root.children.set("cached", {
        label: "cached by the caching allocator: reserved, not allocated",
        frame: null, bytes: state.cached_bytes, count: 0, children: new Map(), sites: [], kind: "cached",
      });
    }
    return root;
  }

  function sitesUnder(tree) {
    const sites = [...tree.sites];
    for (const child of tree.children.values()) sites.push(...sitesUnder(child));
    return sites;
  }

  function flameFigure(process) {
    const pictures = process.pictures;
    const frames = report.frames;
    const width = 1180;
    const row = 18;
    let stateIndex = 0;
    let collapse = true;
    let focus = [];
    const controls = html("div", { class: "controls" });
    const note = html("p", { class: "muted" });
    const holder = html("div", { class: "flame-holder" });
    const details = html("div", { class: "details", hidden: true });

    function draw() {
      const state = pictures.states[stateIndex];
      const tree = buildTree(state, frames, collapse);
      let top = tree;
      for (const key of focus) {
        const next = top.children.get(key);
        if (!next) break;
        top = next;
      }
      let depth = 0;
      const measure = (n, d) => {
        depth = Math.max(depth, d);
        for (const child of n.children.values()) measure(child, d + 1);
      };
      measure(top, 1);
      const chart = svg("svg", {
        viewBox: `0 0 ${width} ${depth * row}`,
        width: "100%",
        class: "flame",
        role: "img",
        "aria-label": `What held ${bytes(top.bytes)} at ${state.name}, by stack`,
        "data-root-bytes": tree.bytes,
      });
      const place = (n, x0, w, d, path) => {
        if (w < 0.5) return;
        const box = svg("rect", {
          x: x0.toFixed(2), y: d * row, width: Math.max(w - 0.5, 0.5).toFixed(2), height: row - 1,
          class: d === 0 && n === tree ? "root" : n.kind,
          "data-bytes": n.bytes,
          "data-label": n.label,
        });
        const percent = tree.bytes ? ((100 * n.bytes) / tree.bytes).toFixed(1) : "0";
        const text = (n.frame ? frameDetail(n.frame) : n.label) + `\n${bytes(n.bytes)} (${percent} %)` +
          (n.count ? `, ${plural(n.count, "allocation")}` : "");
        box.addEventListener("mousemove", (event) => showTooltip(event, text));
        box.addEventListener("mouseleave", hideTooltip);
        box.addEventListener("click", () => {
          hideTooltip();
          // The top box zooms out a level; any other zooms into itself.
          focus = n === top && path.length ? path.slice(0, -1) : path;
          showDetails(n, tree);
          draw();
        });
        chart.append(box);
        if (w > 40) {
          const label = svg("text", { x: x0 + 4, y: d * row + 13 });
          const room = Math.floor((w - 8) / 6.2);
          const name = d === 0 && n === tree ? `all: ${bytes(n.bytes)}` : n.label;
          label.textContent = name.length > room ? name.slice(0, Math.max(room - 1, 1)) + "…" : name;
          chart.append(label);
        }
        let at = x0;
        const children = [...n.children.entries()].sort((a, b) => b[1].bytes - a[1].bytes);
        for (const [key, child] of children) {
          const cw = n.bytes ? (w * child.bytes) / n.bytes : 0;
          place(child, at, cw, d + 1, [...path, key]);
          at += cw;
        }
      };
      place(top, 0, width, 0, focus);
      holder.replaceChildren(chart);
      note.textContent = (state.largest_only ? "Only the largest sites live then are known (the five with the most bytes). " : "") +
        `${bytes(state.held_bytes)} held by the program` +
        (state.cached_bytes ? `, ${bytes(state.cached_bytes)} more cached by its allocator` : "") +
        ` at ${state.name}. Click a box to zoom in and list its sites; click the top box to zoom out.`;
    }

    function showDetails(n, tree) {
      const sites = sitesUnder(n).sort((a, b) => b.bytes - a.bytes);
      details.hidden = false;
      const title = n.frame ? frameDetail(n.frame) : n.label;
      const list = html("div", {});
      for (const site of sites.slice(0, 20)) {
        list.append(html("div", { class: "site" },
          html("strong", { text: `${bytes(site.bytes)} in ${allocations(site.kind, site.count)}` }),
          html("span", { text: " made at " + siteName(site, frames) }),
          html("div", { class: "frames", text: stackText(site, frames) })));
      }
      if (sites.length > 20) list.append(html("p", { class: "muted", text: `and ${plural(sites.length - 20, "more site")}` }));
      details.replaceChildren(
        html("h3", { text: title.split("\n")[0] }),
        html("p", { class: "mono", text: title.split("\n").slice(1).join(" — ") }),
        html("p", { text: `${bytes(n.bytes)} of ${bytes(tree.bytes)}` + (n.count ? ` in ${plural(n.count, "allocation")}` : "") +
          (sites.length ? `, from ${plural(sites.length, "site")}:` : "") }),
        list);
    }

    pictures.states.forEach((state, index) => {
      const button = html("button", { type: "button", "aria-pressed": index === 0 ? "true" : "false", text: state.name });
      button.addEventListener("click", () => {
        stateIndex = index;
        focus = [];
        details.hidden = true;
        for (const other of controls.querySelectorAll("button.state")) other.setAttribute("aria-pressed", "false");
        button.setAttribute("aria-pressed", "true");
        draw();
      });
      button.classList.add("state");
      controls.append(button);
    });
    const libraries = html("button", { type: "button", "aria-pressed": "true", text: "libraries' frames collapsed" });
    libraries.addEventListener("click", () => {
      collapse = !collapse;
      focus = [];
      libraries.setAttribute("aria-pressed", collapse ? "true" : "false");
      libraries.textContent = collapse ? "libraries' frames collapsed" : "libraries' frames shown";
      draw();
    });
    controls.append(libraries);
    draw();
    return html("figure", {}, controls, holder, note, details);
  }

  // What the sites made in a stretch of the run, what of it is still alive, and what they freed.
  function stretchPanel(process, panel, range) {
    if (range === null) {
      panel.hidden = true;
      return;
    }
    const activity = process.pictures.activity;
    const frames = report.frames;
    const [from, to] = range;
    const first = Math.min(activity.buckets - 1, Math.floor((from / activity.duration_s) * activity.buckets));
    const last = Math.min(activity.buckets - 1, Math.max(first, Math.ceil((to / activity.duration_s) * activity.buckets) - 1));
    const inStretch = (pairs) => pairs.reduce((sum, [bucket, value]) => (bucket >= first && bucket <= last ? sum + value : sum), 0);
    const rows = activity.sites.map((site) => ({
      site,
      live: inStretch(site.made_live),
      made: inStretch(site.made),
      freed: inStretch(site.freed),
    })).filter((r) => r.live || r.made || r.freed);
    rows.sort((a, b) => b.live - a.live || b.made - a.made || b.freed - a.freed);
    const shownFrom = (first / activity.buckets) * activity.duration_s;
    const shownTo = ((last + 1) / activity.buckets) * activity.duration_s;
    const table = html("table", { class: "stretch-sites" },
      html("thead", {}, html("tr", {},
        html("th", { text: "made at" }),
        html("th", { class: "number", text: "made here, still alive at the end" }),
        html("th", { class: "number", text: "made here" }),
        html("th", { class: "number", text: "freed here" }))));
    const body = html("tbody");
    for (const r of rows.slice(0, 25)) {
      const name = html("td", {}, html("details", {}, html("summary", { text: siteName(r.site, frames) + ` (${r.site.kind})` }),
        html("div", { class: "frames", text: stackText(r.site, frames) })));
      body.append(html("tr", { "data-site": siteName(r.site, frames) }, name,
        html("td", { class: "number", "data-bytes": r.live, text: bytes(r.live) }),
        html("td", { class: "number", "data-bytes": r.made, text: bytes(r.made) }),
        html("td", { class: "number", "data-bytes": r.freed, text: bytes(r.freed) })));
    }
    table.append(body);
    const notes = [];
    if (activity.events_from_s !== null && shownFrom < activity.events_from_s)
      notes.push(`The events before ${seconds(activity.events_from_s)} were overwritten (the ring wrapped): what was made and freed before then is not known; what is still alive is.`);
    if (activity.spread) notes.push(`${plural(activity.spread, "live allocation")} had no slot of its own in the trace: when each was made is not known, only the stretches of the run their sites made them in, and they are counted as if made evenly over those.`);
    if (activity.sites_left_out) notes.push(`The ${plural(activity.sites_left_out, "least active site")} are left out.`);
    panel.hidden = false;
    const everywhere = (process.summary.devices || []).length > 1 ? ", on all of the process's devices" : "";
    panel.replaceChildren(
      html("h3", { text: `From ${seconds(shownFrom)} to ${seconds(shownTo)}${everywhere}` }),
      rows.length ? table : html("p", { text: "Nothing was made or freed in this stretch." }),
      ...notes.map((text) => html("p", { class: "muted", text })));
  }

  function processSection(process) {
    const section = html("section", { id: `process-${process.pid}`, "data-pid": process.pid });
    const role = process.role && process.role.text ? ` (${process.role.text})` : "";
    section.append(html("h2", { text: `Process ${process.pid}${role}: ${(process.command || []).join(" ")}` }));
    const facts = [`trace ${process.trace}`, `ran ${seconds(process.duration_s)}`];
    if (process.simulated) facts.push("simulated CUDA device: no real GPU was used");
    section.append(html("p", { class: "muted mono", text: facts.join(" · ") }));
    // What ended a program that failed comes before the verdict: it is what its author ran it for.
    if (process.error) section.append(html("div", { class: "diagnosis error", text: `Ended by ${process.error.text}` }));
    // A signal that ended it, and who sent it, where known, the same.
    const ended = process.ended || {};
    if (!process.error && (ended.how === "signal" || ended.how === "killed"))
      section.append(html("div", { class: "diagnosis error", text: ended.text.charAt(0).toUpperCase() + ended.text.slice(1) }));
    // A notebook's kernel outlives its cells' errors: the latest one, as the text report says it.
    const cellErrors = process.cell_errors || [];
    if (cellErrors.length) {
      const latest = cellErrors[cellErrors.length - 1];
      const before = cellErrors.length - 1;
      const more = before ? ` (${before} earlier cell${before === 1 ? "" : "s"} raised too)` : "";
      section.append(html("div", { class: "diagnosis error", text: `${latest.cell} raised ${latest.text}${more}` }));
    }
    const kind = process.diagnosis.kind;
    section.append(html("div", { class: "diagnosis " + kind },
      html("span", { class: "badge", text: kind.replace(/_/g, " ") + ": " }),
      document.createTextNode(process.diagnosis.text)));
    if (process.diagnosis.host && process.diagnosis.host.text)
      section.append(html("div", { class: "diagnosis", text: process.diagnosis.host.text }));
    const notes = [...(process.summary.exactness.notes || []), ...(process.warnings || [])];
    if (notes.length) section.append(html("ul", { class: "muted" }, ...notes.map((text) => html("li", { text }))));

    const devices = process.summary.devices || [];
    if (devices.length) {
      const table = html("table", {}, html("thead", {}, html("tr", {},
        ...["device", "reserved peak", "reserved at the end", "allocated peak", "allocated at the end", "capacity"]
          .map((text) => html("th", { class: text === "device" ? "" : "number", text })))));
      const body = html("tbody");
      for (const device of devices)
        body.append(html("tr", {},
          html("td", { text: `cuda:${device.device}` }),
          ...[device.peak_reserved_bytes, device.final_reserved_bytes, device.peak_allocated_bytes, device.final_allocated_bytes, device.capacity_bytes]
            .map((value) => html("td", { class: "number", text: value === null ? "unknown" : bytes(value) }))));
      table.append(body);
      section.append(table);
    }

    section.append(html("h3", { text: "Memory over time" }));
    const stretch = html("div", { class: "stretch", hidden: true, "aria-live": "polite" });
    // One stretch at a time, whichever chart it was dragged on: the others' selections go.
    const onStretch = (range, chart) => {
      for (const other of section.querySelectorAll("svg.timeline"))
        if (other !== chart) other.querySelector(".selection").setAttribute("visibility", "hidden");
      stretchPanel(process, stretch, range);
    };
    const failures = process.failures || [];
    section.append(timelineFigure(process, processSeries(process), `pid ${process.pid}`, failures, onStretch));
    if (devices.length > 1)
      for (const device of devices) {
        section.append(html("h4", { text: `cuda:${device.device}` }));
        section.append(timelineFigure(process, deviceSeries(device), `cuda:${device.device} in pid ${process.pid}`,
          failures.filter((failure) => failure.device === device.device), onStretch));
      }
    section.append(stretch);
    if (!process.host_only) {
      section.append(html("h3", { text: "What holds the memory" }));
      section.append(flameFigure(process));
    }
    return section;
  }

  // In a notebook the page is a frame's srcdoc, where "#process-1" would resolve against the notebook's
  // address and load it: the link scrolls instead.
  function processLink(pid) {
    const link = html("a", { href: `#process-${pid}`, text: String(pid) });
    link.addEventListener("click", (event) => {
      event.preventDefault();
      document.getElementById(`process-${pid}`).scrollIntoView();
    });
    return link;
  }

  function processTable(processes) {
    const table = html("table", {}, html("thead", {}, html("tr", {},
      ...["pid", "who", "peak reserved", "allocated at the end", "diagnosis"].map((text) => html("th", { text })))));
    const body = html("tbody");
    for (const process of processes) {
      body.append(html("tr", { "data-drawn": process.drawn ? "true" : "false" },
        html("td", {}, process.drawn ? processLink(process.pid) : document.createTextNode(String(process.pid))),
        html("td", { text: process.role && process.role.text ? process.role.text : (process.command || []).join(" ") }),
        html("td", { class: "number", text: bytes(process.summary.peak_reserved_bytes) }),
        html("td", { class: "number", text: bytes(process.summary.final_allocated_bytes) }),
        html("td", { text: process.diagnosis.kind.replace(/_/g, " ") })));
    }
    table.append(body);
    return table;
  }

  // The job's ranks as one: a bar a rank (its peak of reserved memory, and what it held at its end), the
  // ranks that stand apart marked, then what the text report says of them. One bar a rank stays bounded:
  // a thousand ranks are a thousand thin bars.
  function jobSection(job) {
    const title = (job.id === null ? "" : `Job ${job.id}, `) + plural(job.ranks.length, "rank") +
      (job.world_size === null ? "" : ` of ${job.world_size}`);
    const width = 1180;
    const height = 200;
    const left = 70;
    const bottom = 24;
    const plotWidth = width - left - 10;
    const plotHeight = height - bottom - 10;
    const highest = Math.max(1, ...job.ranks.map((rank) => rank.peak_reserved_bytes));
    const step = plotWidth / Math.max(1, job.ranks.length);
    const apart = new Set(job.apart.map((entry) => entry.rank));
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", class: "ranks", role: "img",
      "aria-label": `peak reserved memory of each of ${job.ranks.length} ranks` });
    chart.append(svg("text", { x: left - 6, y: 18, "text-anchor": "end", text: bytes(highest) }),
      svg("text", { x: left - 6, y: 10 + plotHeight, "text-anchor": "end", text: "0" }));
    job.ranks.forEach((rank, index) => {
      const x = left + index * step;
      const barWidth = Math.max(1, step - (step > 4 ? 1 : 0));
      const scaled = (value) => (plotHeight * value) / highest;
      const peak = svg("rect", { x, y: 10 + plotHeight - scaled(rank.peak_reserved_bytes), width: barWidth,
        height: scaled(rank.peak_reserved_bytes), class: `rank-peak ${rank.diagnosis}${apart.has(rank.rank) ? " apart" : ""}`,
        "data-rank": rank.rank });
      const final = svg("rect", { x, y: 10 + plotHeight - scaled(rank.final_reserved_bytes), width: barWidth,
        height: scaled(rank.final_reserved_bytes), class: "rank-final" });
      const text = `rank ${rank.rank} on ${rank.hostname}${rank.local_rank === null ? "" : ` (local ${rank.local_rank})`}: ` +
        `peak ${bytes(rank.peak_reserved_bytes)}, ${bytes(rank.final_reserved_bytes)} at its end, ` +
        `${rank.diagnosis.replace(/_/g, " ")}` + (rank.top_site ? `\n${rank.diagnosis === "leak" ? "grows" : "holds most"} at ${rank.top_site}` : "");
      for (const box of [peak, final]) {
        box.addEventListener("mousemove", (event) => showTooltip(event, text));
        box.addEventListener("mouseleave", hideTooltip);
      }
      chart.append(peak, final);
    });
    const first = job.ranks.length ? job.ranks[0].rank : 0;
    const last = job.ranks.length ? job.ranks[job.ranks.length - 1].rank : 0;
    chart.append(svg("text", { x: left, y: height - 6, text: `rank ${first}` }),
      svg("text", { x: width - 10, y: height - 6, "text-anchor": "end", text: `rank ${last}` }));
    return html("section", { class: "job" },
      html("h2", { text: title }),
      html("figure", {}, chart,
        html("figcaption", { text: "Each rank's peak of reserved memory (the full bar; outlined where it stands apart " +
          "from the other ranks) and what it held at its end (shaded blue). A leaking rank's bar is drawn in the " +
          "failure colour." })),
      ...(job.findings || []).map((finding) => html("p", { class: "diagnosis", text: finding })));
  }

  // Each device that several processes used: what they held together, and each one's share.
  function sharedDevicesSection(devices, processes) {
    const byPid = new Map(processes.map((process) => [process.pid, process]));
    const section = html("section", { class: "shared-devices" }, html("h2", { text: "Devices shared by processes" }));
    for (const device of devices) {
      const contexts = device.contexts ? `; ${plural(device.contexts, "process")} made a context there, which takes ` +
        "hundreds of MiB on a real GPU that no allocation counts" : "";
      section.append(html("p", { text: `Device ${device.device} on ${device.hostname} was used by ` +
        `${plural(device.processes.length, "process", "processes")}: together they reserved at most ` +
        `${bytes(device.peak_reserved_bytes)} at once` + (device.capacity_bytes === null ? "" : ` of its ${bytes(device.capacity_bytes)}`) +
        `${contexts}.` }));
      const body = html("tbody");
      for (const user of device.processes) {
        const process = byPid.get(user.pid);
        const who = process && process.role && process.role.text ? process.role.text : (process ? (process.command || []).join(" ") : "");
        body.append(html("tr", {},
          html("td", {}, process && process.drawn ? processLink(user.pid) : document.createTextNode(String(user.pid))),
          html("td", { text: who }),
          html("td", { class: "number", text: bytes(user.peak_reserved_bytes) }),
          html("td", { class: "number", text: bytes(user.final_reserved_bytes) }),
          html("td", { text: user.context ? (user.context_site ? `made at ${user.context_site}` : "yes") : "no" })));
      }
      section.append(html("table", {}, html("thead", {}, html("tr", {},
        ...["pid", "who", "peak reserved", "at its end", "context"].map((text) => html("th", { text })))), body));
    }
    return section;
  }

  function stateName(state) {
    const process = `pid ${state.pid} (${state.command_line.join(" ")})`;
    return state.marker === null ? `the end of ${process}` : `"${state.marker}" at ${seconds(state.t_s)} in ${process}`;
  }

  // --diff and --between: each site's bytes then and now as two bars on one scale, with its stack.
  function changesPage(document_) {
    const main = document.getElementById("report");
    const changes = document_.changes;
    const grown = changes.filter((change) => change.change_bytes > 0).length;
    main.replaceChildren(
      html("h1", { text: "What changed" }),
      html("p", { text: `From ${stateName(document_.before)}` }),
      html("p", { text: `to ${stateName(document_.after)}.` }),
      html("p", { class: "diagnosis", text: `The program held ${bytes(document_.before.bytes)}, then ${bytes(document_.after.bytes)} ` +
        `(${document_.change_bytes < 0 ? "" : "+"}${bytes(document_.change_bytes)}). ${plural(grown, "site")} grew and ` +
        `${document_.sites_changed - grown} shrank` + (changes.length < document_.sites_changed ? `; the ${changes.length} largest changes:` : ".") }));
    const largest = Math.max(1, ...changes.map((change) => Math.max(change.before.bytes, change.after.bytes)));
    const width = 1180;
    const list = html("div", { class: "changes" });
    changes.forEach((change, index) => {
      const bars = svg("svg", { viewBox: `0 0 ${width} 34`, width: "100%", class: "change-bars", role: "img",
        "aria-label": `${bytes(change.before.bytes)} then, ${bytes(change.after.bytes)} now` });
      [["before", change.before.bytes, "var(--library)"], ["after", change.after.bytes, change.change_bytes > 0 ? "var(--failure)" : "var(--rss)"]]
        .forEach(([key, value, colour], row) => {
          const box = svg("rect", { x: 160, y: row * 17, height: 15, width: ((width - 170) * value) / largest, "data-state": key, "data-bytes": value });
          box.style.fill = colour;
          bars.append(box, svg("text", { x: 150, y: row * 17 + 12, "text-anchor": "end", text: `${key === "before" ? "then" : "now"} ${bytes(value)}` }));
        });
      const held = (side) => (side.count ? `${bytes(side.bytes)} in ${allocations(change.kind, side.count)}` : "nothing");
      list.append(html("section", { class: "change", "data-change-bytes": change.change_bytes },
        html("h3", { text: `#${index + 1} ${change.change_bytes < 0 ? "" : "+"}${bytes(change.change_bytes)}: ${held(change.before)} then, ${held(change.after)} now` }),
        bars,
        html("div", { class: "frames", text: change.lines.join("\n") })));
    });
    main.append(list);
  }

  if (report.schema === "gpuleak-changes/1") {
    document.title = "gpuleak: what changed";
    changesPage(report);
    return;
  }

  const main = document.getElementById("report");
  const processes = report.processes || [];
  if (processes.length && processes[0].command && processes[0].command.length)
    document.title = "gpuleak: " + processes[0].command.join(" ");
  main.replaceChildren(html("h1", { text: "gpuleak report" }),
    html("p", { class: "muted", text: `${plural(processes.length, "process", "processes")}. Made by gpuleak-report; everything it shows is in this file.` }));
  if (report.job && report.job.ranks.length > 1) main.append(jobSection(report.job));
  if (processes.length > 1) main.append(processTable(processes));
  if (report.run && report.run.shared_devices && report.run.shared_devices.length)
    main.append(sharedDevicesSection(report.run.shared_devices, processes));
  const listed = processes.filter((process) => !process.drawn).length;
  if (listed)
    main.append(html("p", { class: "muted", text: `The page draws the ${processes.length - listed} processes that say the most ` +
      `(a verdict other than stable first, then the most device memory, then the most host memory); the other ${listed} are ` +
      "in the table only. gpuleak-report --format html with one's trace (in report.json) draws it." }));
  for (const process of processes) if (process.drawn) main.append(processSection(process));
})();
