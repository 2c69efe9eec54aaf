// A picture's geometry (opening height, zoom about a point, the point under the pointer) and its data, on
// lib/picture.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { MAX_HEIGHT, openingHeight, parsePicture, parseViewBox, pointAt, scaleOf, zoomBox } from '../lib/picture.js';

const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-9, `${a} != ${b}`);

test('a viewBox is four numbers with a positive size', () => {
  assert.deepEqual(parseViewBox('0.00 0.00 1630.00 409.00'), { x: 0, y: 0, width: 1630, height: 409 });
  assert.deepEqual(parseViewBox('-4,2 10 20'), { x: -4, y: 2, width: 10, height: 20 });
  assert.equal(parseViewBox(null), null);
  assert.equal(parseViewBox('0 0 0 10'), null);
  assert.equal(parseViewBox('0 0 ten 10'), null);
});

test('a picture opens fitted to the width, never enlarged, at most MAX_HEIGHT tall', () => {
  assert.equal(openingHeight({ x: 0, y: 0, width: 1630, height: 409 }, 1000), Math.round(409 * 1000 / 1630));
  assert.equal(openingHeight({ x: 0, y: 0, width: 300, height: 200 }, 1000), 200);
  assert.equal(openingHeight({ x: 0, y: 0, width: 500, height: 5000 }, 1000), MAX_HEIGHT);
  assert.equal(openingHeight({ x: 0, y: 0, width: 4000, height: 10 }, 1000), 80);
});

test('zooming keeps the point under the pointer where it is', () => {
  const box = { x: 0, y: 0, width: 1600, height: 400 };
  const [w, h] = [800, 300];  // scale 0.5 (the width decides), the picture centred vertically
  assert.equal(scaleOf(box, w, h), 0.5);
  const p = pointAt(box, w, h, 200, 150);
  assert.deepEqual(p, { x: 400, y: 200 });
  const zoomed = zoomBox(box, 2, p.x, p.y);
  assert.equal(scaleOf(zoomed, w, h), 1);
  const q = pointAt(zoomed, w, h, 200, 150);
  close(q.x, p.x);
  close(q.y, p.y);
});

test('picture data needs its schema, a caption and what it shows', () => {
  const good = { schema: 1, caption: 'E-graph as built: all IR e-classes', what: 'e-graph' };
  assert.deepEqual(parsePicture(good), { ok: true, picture: good });
  assert.match(parsePicture({ ...good, schema: 2 }).error, /schema 2/);
  assert.match(parsePicture({ schema: 1, caption: 3, what: 'x' }).error, /caption/);
  assert.match(parsePicture([]).error, /not an object/);
});
